/// A partition's way in: it decides what the restore installs (the newest
/// snapshot of each activity read back from `state`), which records wait
/// until the restore is done, and, for a new owner, which pushes are held
/// while it replays the commands its previous owner may have pushed.
///
/// The catch-up: the previous owner may have pushed any state up to the
/// partition's end at assignment, so pushing an intermediate state of the
/// replay could send a device a state older than one it shows (semantic 2).
/// Each activity's flushes are merged while held and pushed once, when the
/// replay has been read or the catch-up limit passed.
///
/// Registrations come on `tokens`, read beside `commands` by another
/// consumer: the replay could end before the registrations its previous
/// owner had read, and the held state would go to fewer tokens than it
/// had (or none), each token registered later being taken as holding it.
/// So the catch-up also waits until `tokens` has been read to its end at
/// assignment.
struct PartitionRestore: Sendable {
    typealias Record = PartitionDispatcher.Record

    struct CatchUp: Sendable {
        /// The `commands` offset after the last record of the replay.
        var end: Int64
        /// The `tokens` offset after the last registration there at
        /// assignment; nil once read (or nothing was left to read).
        var tokensEnd: Int64?
        /// Whether the replay's last command has been read.
        var replayed = false
        /// The snapshots installed, by activity: what the previous owner
        /// last pushed, while the coalescer's states move on with the replay.
        var pushed: [ActivityID: ActivityState] = [:]
        /// When the held pushes go anyway; nil until the restore is done.
        var deadline: UnixTime?
        var held: [ActivityID: Coalescer.Flush] = [:]
    }

    private(set) var isRestoring = true
    /// The snapshots read back so far, one per activity.
    private var states: [ActivityState] = []
    /// Records that arrived before the restore finished, in arrival order.
    private var early: [(InternalTopic, Record)] = []
    private var catchUp: CatchUp?

    /// Whether pushes are held for the replay of the previous owner's commands.
    var isCatchingUp: Bool { catchUp != nil }
    /// When the held pushes must go, if any are held.
    var deadline: UnixTime? { catchUp?.deadline }
    /// Whether no push is held.
    var holdsNothing: Bool { catchUp?.held.isEmpty ?? true }

    /// A snapshot read back from `state` replaces the activity's earlier one.
    mutating func restore(_ snapshot: ActivityState) {
        states.removeAll { $0.activityID == snapshot.activityID }
        states.append(snapshot)
    }

    /// A tombstone on `state` removes the activity's snapshot.
    mutating func removeState(key: String) {
        states.removeAll { $0.activityID.rawValue == key }
    }

    /// Keeps a record that arrived while restoring; false once restored.
    mutating func buffer(_ topic: InternalTopic, _ record: Record) -> Bool {
        guard isRestoring else { return false }
        early.append((topic, record))
        return true
    }

    /// While restoring: hold every push until the `commands` record before
    /// `end` has been read, and the `tokens` record before `tokensEnd` when
    /// given. An empty partition (`end` 0) holds nothing.
    mutating func holdPushes(untilCommandOffset end: Int64, tokenOffset tokensEnd: Int64? = nil) {
        guard isRestoring, end > 0 else { return }
        catchUp = CatchUp(end: end, tokensEnd: tokensEnd.flatMap { $0 > 0 ? $0 : nil })
    }

    /// Ends the restore: the snapshots to install and the records to replay,
    /// once; the catch-up, if any, lasts at most `catchUpLimit` seconds from now.
    mutating func finish(now: UnixTime, catchUpLimit: Double) -> (states: [ActivityState], early: [(InternalTopic, Record)])? {
        guard isRestoring else { return nil }
        isRestoring = false
        catchUp?.deadline = now + catchUpLimit
        catchUp?.pushed = Dictionary(states.map { ($0.activityID, $0) }) { _, newer in newer }
        defer {
            states = []
            early = []
        }
        return (states, early)
    }

    /// What the activity's tokens may be taken to hold: while catching up,
    /// its restored snapshot (nil: none), not the replayed state nobody was
    /// sent yet; otherwise `current`.
    func pushedState(of activity: ActivityID, current: ActivityState?) -> ActivityState? {
        guard let catchUp else { return current }
        return catchUp.pushed[activity]
    }

    /// The activity was dropped: its restored snapshot no longer stands for
    /// what its tokens hold.
    mutating func forget(_ activity: ActivityID) {
        catchUp?.pushed.removeValue(forKey: activity)
    }

    /// Whether the catch-up holds a push of `activity`.
    func holds(_ activity: ActivityID) -> Bool {
        catchUp?.held[activity] != nil
    }

    /// Holds `flush` during the catch-up, merged with what the activity
    /// already holds; false when nothing is held.
    mutating func hold(_ flush: Coalescer.Flush) -> Bool {
        guard catchUp != nil else { return false }
        let activity = flush.push.activityID
        let merged = catchUp?.held[activity].map { .merged($0, flush) } ?? flush
        catchUp?.held[activity] = merged
        return true
    }

    /// The held flushes, by activity id, when the `commands` record at
    /// `offset` ends the replay and the registrations are read; none otherwise.
    mutating func read(commandOffset offset: Int64) -> [Coalescer.Flush] {
        guard !isRestoring, let end = catchUp?.end, offset >= end - 1 else { return [] }
        catchUp?.replayed = true
        return releaseWhenRead()
    }

    /// The held flushes when the `tokens` record at `offset` is the last
    /// registration to wait for and the replay has been read; none otherwise.
    mutating func read(tokenOffset offset: Int64) -> [Coalescer.Flush] {
        guard !isRestoring, let tokensEnd = catchUp?.tokensEnd, offset >= tokensEnd - 1 else { return [] }
        catchUp?.tokensEnd = nil
        return releaseWhenRead()
    }

    private mutating func releaseWhenRead() -> [Coalescer.Flush] {
        guard let catchUp, catchUp.replayed, catchUp.tokensEnd == nil else { return [] }
        return release()
    }

    /// The held flushes, by activity id, when the catch-up limit has passed.
    mutating func timerFired(now: UnixTime) -> [Coalescer.Flush] {
        guard let deadline = catchUp?.deadline, deadline <= now else { return [] }
        return release()
    }

    /// Ends the catch-up: the held flushes, by activity id.
    mutating func release() -> [Coalescer.Flush] {
        guard let hold = catchUp else { return [] }
        catchUp = nil
        return hold.held.sorted { $0.key < $1.key }.map(\.value)
    }
}

extension Coalescer.Flush {
    /// Two flushes of one activity held back as one: the newer state with
    /// every offset, a start if either was one (devices that missed it need
    /// it), the latest alert and the highest priority.
    static func merged(_ older: Self, _ newer: Self) -> Self {
        var flush = newer
        flush.offsets = older.offsets + newer.offsets
        flush.commandIDs = Self.appending(newer.commandIDs, to: older.commandIDs)
        if older.push.event == .start, newer.push.event == .update {
            flush.push = newer.push.asStart
            flush.push.inputPushToken = older.push.inputPushToken
            flush.push.inputPushChannel = older.push.inputPushChannel
        }
        flush.push.alert = newer.push.alert ?? older.push.alert
        flush.push.priority = max(newer.push.priority, older.push.priority)
        if !older.traces.isEmpty { flush.trace(CommandTrace.appending(newer.traces, to: older.traces)) }
        return flush
    }
}
