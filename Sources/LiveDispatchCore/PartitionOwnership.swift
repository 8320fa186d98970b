/// Which partitions of the dispatcher group a worker owns, and how each one
/// moves in and out of its hands.
///
/// The group assigns `commands` partitions incrementally (cooperative
/// rebalancing): a rebalance revokes only the partitions that move, and a
/// moved partition is assigned to its new owner only after the old owner's
/// revocation has returned, in a second round of the rebalance. This machine
/// decides what happens between:
///
/// - **Taken** (`restoring`): a new partition machine holds the partition's
///   records. It first waits until the previous owner has let go (the
///   partition's ``HandOverMark`` is released, or the previous owner's
///   deadline has passed), claiming the partition if it still lingers; then
///   it restores the partition's changelogs and follows the co-partitioned
///   topics (`tokens`, `starts`) from their committed offsets. No push yet.
/// - **Owned**: restored; the partition pushes.
/// - **Lingering**: revoked by a rebalance, and still pushed. The group's
///   second round may take seconds; meanwhile the old owner reads the
///   partition's commands outside the group and pushes on, so the partition
///   is never without a pusher. It marks the partition lingering, with the
///   deadline it lingers to at most (``Configuration/lingerTimeout``), and
///   stops when the new owner claims it or the deadline passes.
/// - **Releasing**: no new send or write starts; the sends and writes
///   already under way are awaited, so what they finish is committed and
///   the next owner does not do it again, for at most
///   ``Configuration/releaseTimeout``. Then it is released: the partition
///   machine closes, its offsets are committed, its co-partitions are no
///   longer followed and its mark says released. A partition revoked without
///   lingering (lingering off, or the group's only member leaving, whose
///   partitions nobody would claim) is released before the revocation
///   returns.
///
/// A lost assignment (the member was thrown out of the group) is released at
/// once and commits nothing: another member may own the partition already,
/// and it redoes whatever was not committed.
///
/// The new owner waits for the old owner's release, or until the old
/// owner's deadline plus its release timeout and ``Configuration/clockSkew``
/// have passed (an old owner that died mid-linger): two owners never push
/// one partition at once.
public struct PartitionOwnership: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Longest a revoked partition waits for its sends and writes under way.
        public var releaseTimeout: Double
        /// Longest a partition revoked by a rebalance is still pushed,
        /// waiting for its next owner's claim; 0 releases it at once. At
        /// most ``PartitionOwnership/longestLinger``.
        public var lingerTimeout: Double
        /// How far apart two workers' clocks may be: a new owner waits this
        /// much longer than the old owner's deadline says.
        public var clockSkew: Double

        public init(releaseTimeout: Double = 2, lingerTimeout: Double = 0, clockSkew: Double = 0.5) {
            self.releaseTimeout = releaseTimeout
            self.lingerTimeout = lingerTimeout
            self.clockSkew = clockSkew
        }
    }

    public enum Phase: String, Sendable, Hashable, CaseIterable {
        case restoring
        case owned
        case lingering
        case releasing
    }

    public enum Action: Sendable, Hashable {
        /// Start holding the partition: a new partition machine, its
        /// records held; read its ``HandOverMark``.
        case take(Int32)
        /// The previous owner has let go: follow the co-partitions and read
        /// the changelogs.
        case restore(Int32)
        /// Restored: let its records flow and push.
        case resume(Int32)
        /// Revoked, and still pushed: read its commands outside the group
        /// from where the partition machine stands.
        case linger(Int32)
        /// Write the partition's mark.
        case mark(Int32, HandOverMark)
        /// Revoked: start no new send or write; keep taking the answers of those under way.
        case quiesce(Int32)
        /// Let go: close the partition machine; when `commit`, commit the
        /// offsets of what it finished; stop following its co-partitions
        /// (and its commands, when it lingered).
        case release(Int32, commit: Bool)
        case observe(Observation)
    }

    public enum Observation: Sendable, Hashable {
        /// From the assignment to the end of the restore: the part of a move
        /// that the new owner spends.
        case takenOver(Int32, seconds: Double)
        /// From the assignment to the previous owner's release, when the
        /// previous owner still lingered; `released` is false when its
        /// deadline passed instead.
        case waitedForRelease(Int32, seconds: Double, released: Bool)
        /// From the revocation to the end of the linger; `claimed` is false
        /// when nobody claimed the partition before the deadline.
        case lingered(Int32, seconds: Double, claimed: Bool)
        /// From the start of the release to its end. `settled` is false when
        /// work under way was cut short (the timeout passed or the
        /// assignment was lost).
        case released(Int32, seconds: Double, settled: Bool)
    }

    /// Where a held partition stands, with what that stage needs.
    private enum Stage: Sendable, Hashable {
        /// Restoring, waiting for the previous owner to let go; `until`
        /// once it was found lingering: when to stop waiting.
        case awaitingRelease(until: UnixTime?)
        /// Restoring: the previous owner has let go; the changelogs are read.
        case reading
        case owned
        /// Pushed until claimed, or until `until`.
        case lingering(until: UnixTime)
        /// Awaiting what is under way until `until`; `lingered` when it
        /// lingered first, so its mark is released with it.
        case releasing(until: UnixTime, lingered: Bool)

        var phase: Phase {
            switch self {
            case .awaitingRelease, .reading: .restoring
            case .owned: .owned
            case .lingering: .lingering
            case .releasing: .releasing
            }
        }

        var deadline: UnixTime? {
            switch self {
            case .awaitingRelease(let until): until
            case .lingering(let until), .releasing(let until, _): until
            case .reading, .owned: nil
            }
        }
    }

    private struct Entry: Sendable, Hashable {
        var stage: Stage
        /// When the current phase began.
        var since: UnixTime
    }

    /// The longest any worker lingers: a mark whose deadline lies further
    /// ahead (a clock far off, or a mark no worker wrote) is waited for only
    /// this long.
    public static let longestLinger: Double = 60

    public let configuration: Configuration
    private var entries: [Int32: Entry] = [:]
    /// This worker is leaving: nothing lingers any more.
    private var leaving = false

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The phase of `number`, or nil when this worker does not hold it.
    public func phase(of number: Int32) -> Phase? { entries[number]?.stage.phase }

    /// The partitions in `phase`, in order.
    public func partitions(in phase: Phase) -> [Int32] {
        entries.filter { $0.value.stage.phase == phase }.keys.sorted()
    }

    /// Every partition this worker holds, in any phase, in order.
    public var held: [Int32] { entries.keys.sorted() }

    /// The partitions whose mark is to be read: taken ones waiting for
    /// their previous owner, and lingering ones waiting for a claim.
    public var awaitingMarks: [Int32] {
        entries.filter {
            switch $0.value.stage {
            case .awaitingRelease, .lingering: true
            case .reading, .owned, .releasing: false
            }
        }.keys.sorted()
    }

    /// Whether the partition's previous owner has let go, so its changelogs
    /// may be read (and it is not restored yet).
    public func mayRestore(_ number: Int32) -> Bool {
        entries[number]?.stage == .reading
    }

    /// The partitions this worker may push for: restored and not released yet.
    public func mayPush(_ number: Int32) -> Bool {
        switch entries[number]?.stage.phase {
        case .owned, .lingering: true
        case .restoring, .releasing, nil: false
        }
    }

    /// The earliest deadline of any phase; nil when none is set.
    public var nextDeadline: UnixTime? {
        entries.values.compactMap(\.stage.deadline).min()
    }

    /// The group assigned `numbers` (incrementally: only the new ones).
    public mutating func assigned(_ numbers: [Int32], now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for number in Set(numbers).sorted() {
            if let entry = entries[number] {
                switch entry.stage.phase {
                case .restoring, .owned:
                    continue
                case .lingering, .releasing:
                    // Assigned back before its release finished: finish it first.
                    actions += release(number, commit: true, settled: false, now: now)
                }
            }
            entries[number] = Entry(stage: .awaitingRelease(until: nil), since: now)
            actions.append(.take(number))
        }
        return actions
    }

    /// The partition's mark was read.
    public mutating func markRead(_ number: Int32, _ mark: HandOverMark, now: UnixTime) -> [Action] {
        guard var entry = entries[number] else { return [] }
        switch (entry.stage, mark) {
        case (.awaitingRelease, .released):
            return clear(number, released: true, now: now)
        case (.awaitingRelease(let waiting), .lingering(let until)), (.awaitingRelease(let waiting), .claimed(let until)):
            // The old owner pushes until `until`, then takes its release timeout to let go.
            let latest = min(until, waiting.map { $0 + -waitAfterDeadline } ?? now + Self.longestLinger)
            let deadline = latest + waitAfterDeadline
            guard now < deadline else { return clear(number, released: false, now: now) }
            entry.stage = .awaitingRelease(until: deadline)
            entries[number] = entry
            if case .lingering = mark { return [.mark(number, .claimed(until: until))] }
            return []
        case (.lingering, .claimed):
            return stopLingering(number, claimed: true, now: now)
        case (.reading, _), (.lingering, _), (.owned, _), (.releasing, _):
            return []
        }
    }

    /// The partition's changelogs are read.
    public mutating func restored(_ number: Int32, now: UnixTime) -> [Action] {
        guard let entry = entries[number], entry.stage == .reading else { return [] }
        entries[number] = Entry(stage: .owned, since: now)
        return [.resume(number), .observe(.takenOver(number, seconds: max(0, now - entry.since)))]
    }

    /// The group revoked `numbers`; `lost` when the member lost its assignment.
    public mutating func revoked(_ numbers: [Int32], lost: Bool, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for number in Set(numbers).sorted() {
            guard let entry = entries[number] else { continue }
            switch (entry.stage.phase, lost) {
            case (_, true):
                actions += release(number, commit: false, settled: false, now: now)
            case (.restoring, false):
                // Nothing was pushed or written: nothing to wait for.
                actions += release(number, commit: true, settled: true, now: now)
            case (.owned, false) where configuration.lingerTimeout > 0 && !leaving:
                let until = now + min(configuration.lingerTimeout, Self.longestLinger)
                entries[number] = Entry(stage: .lingering(until: until), since: now)
                actions += [.linger(number), .mark(number, .lingering(until: until))]
            case (.owned, false):
                actions += quiesce(number, lingered: false, now: now)
            case (.lingering, false), (.releasing, false):
                continue
            }
        }
        return actions
    }

    /// This worker is leaving and nobody will claim its partitions (it is
    /// the group's only member): what lingers stops, and nothing lingers
    /// from now on.
    public mutating func leave(now: UnixTime) -> [Action] {
        leaving = true
        return partitions(in: .lingering).flatMap { stopLingering($0, claimed: false, now: now) }
    }

    /// A releasing partition has no send or write under way any more.
    public mutating func settled(_ number: Int32, now: UnixTime) -> [Action] {
        guard entries[number]?.stage.phase == .releasing else { return [] }
        return release(number, commit: true, settled: true, now: now)
    }

    /// Acts on every deadline that has passed: releases cut short, lingers
    /// ended, waits for a previous owner given up.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        let due = entries.filter { $0.value.stage.deadline.map { $0 <= now } ?? false }.sorted { $0.key < $1.key }
        return due.flatMap { number, entry -> [Action] in
            switch entry.stage.phase {
            case .releasing: release(number, commit: true, settled: false, now: now)
            case .lingering: stopLingering(number, claimed: false, now: now)
            case .restoring: clear(number, released: false, now: now)
            case .owned: []
            }
        }
    }

    /// How long after an old owner's deadline it may still push: its
    /// release timeout, and the clocks' skew.
    private var waitAfterDeadline: Double {
        max(0, configuration.releaseTimeout) + max(0, configuration.clockSkew)
    }

    private mutating func clear(_ number: Int32, released: Bool, now: UnixTime) -> [Action] {
        guard let entry = entries[number], case .awaitingRelease(let until) = entry.stage else { return [] }
        entries[number] = Entry(stage: .reading, since: entry.since)
        // A previous owner found lingering was waited for (`until`).
        let waited: [Action] = until != nil || !released
            ? [.observe(.waitedForRelease(number, seconds: max(0, now - entry.since), released: released))] : []
        return [.restore(number)] + waited
    }

    private mutating func stopLingering(_ number: Int32, claimed: Bool, now: UnixTime) -> [Action] {
        guard let entry = entries[number], entry.stage.phase == .lingering else { return [] }
        return [.observe(.lingered(number, seconds: max(0, now - entry.since), claimed: claimed))] + quiesce(number, lingered: true, now: now)
    }

    private mutating func quiesce(_ number: Int32, lingered: Bool, now: UnixTime) -> [Action] {
        entries[number] = Entry(stage: .releasing(until: now + max(0, configuration.releaseTimeout), lingered: lingered), since: now)
        return [.quiesce(number)]
    }

    private mutating func release(_ number: Int32, commit: Bool, settled: Bool, now: UnixTime) -> [Action] {
        guard let entry = entries.removeValue(forKey: number) else { return [] }
        let since: UnixTime
        let lingered: Bool
        switch entry.stage {
        case .releasing(_, let afterLingering): (since, lingered) = (entry.since, afterLingering)
        case .lingering: (since, lingered) = (now, true)
        case .awaitingRelease, .reading, .owned: (since, lingered) = (now, false)
        }
        return [.release(number, commit: commit)] + (lingered ? [.mark(number, .released)] : [])
            + [.observe(.released(number, seconds: max(0, now - since), settled: settled))]
    }
}
