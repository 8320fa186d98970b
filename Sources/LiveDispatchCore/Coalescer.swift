/// Decides *what* each activity's devices are sent and *when*: the pure
/// state machine behind "Coalescing" and "Fan-out and ordering" in docs/design.md, one per `commands`
/// partition.
///
/// - Every command's `content_state` is merged (RFC 7386) into the
///   activity's full state as it arrives, in offset order; a flush always
///   carries that full state (semantic 1).
/// - Updates are held for `window` after the latest one (a debounce), but
///   never longer than `maxDelay` after the first one held; the flush merges
///   them: the latest alert, the highest priority, the newest stale and
///   dismissal dates (semantic 3). `start` and `end` flush at once.
/// - `aps.timestamp` is the newest event time among the merged commands,
///   never below the previous push's (semantic 4).
/// - A command whose `id` was applied to the activity within the
///   idempotency window is a duplicate: acknowledged, not applied.
/// - Priority budget: past `priority10PerHour` priority-10 pushes in the
///   last hour, an update without an alert is sent at priority 5.
/// - After `end` the activity is closed: later updates and starts are
///   rejected with `activity-ended` (semantic 5). When it is dismissed or
///   expired, and when a start begins the id again, is
///   ``ActivityLifecycle``'s to decide.
///
/// What a flush does on the wire — one push per token, in version order,
/// superseding older versions — is ``FanOut``'s job; the coalescer only
/// numbers its flushes (``LiveActivityPush/version``) so FanOut can tell
/// newer from older. Time is passed in; the owner runs the timers the
/// actions ask for.
public struct Coalescer: Sendable {
    /// Timing and lifetime settings (`coalesce.*`, `activity.*`).
    public struct Configuration: Sendable, Hashable {
        /// Quiet time after the latest update before a flush (`coalesce.window`).
        public var window: Double
        /// Longest an update is held (`coalesce.max_delay`).
        public var maxDelay: Double
        /// Age after which an activity is expired (`activity.max_age`).
        public var maxAge: Double
        /// How long an ended activity without a dismissal date is kept.
        public var endedRetention: Double
        /// Priority of a push whose commands named none.
        public var defaultPriority: PushPriority
        /// How long a command id is remembered (`idempotency.window`).
        public var idempotencyWindow: Double
        /// Most command ids remembered per activity, the newest kept
        /// (`idempotency.max_ids_per_activity`); 0 remembers none.
        public var maxRememberedIDs: Int
        /// Priority-10 pushes per activity in any hour
        /// (`budget.priority_10_per_hour`); beyond it an update without an
        /// alert goes at priority 5. Nil: no budget.
        public var priority10PerHour: Int?
        /// The budget of each app that sets its own (`apps[].budget`), by
        /// app name; nil in it turns that app's budget off. Activities of
        /// other apps, or of none, have ``priority10PerHour``.
        public var priority10PerHourByApp: [String: Int?]

        public init(
            window: Double = 0.25, maxDelay: Double = 1.0, maxAge: Double = 12 * 3600, endedRetention: Double = 4 * 3600,
            defaultPriority: PushPriority = .immediate, idempotencyWindow: Double = 24 * 3600, maxRememberedIDs: Int = 256,
            priority10PerHour: Int? = nil, priority10PerHourByApp: [String: Int?] = [:]
        ) {
            self.priority10PerHourByApp = priority10PerHourByApp.mapValues { $0.map { max(0, $0) } }
            self.window = window
            self.maxDelay = max(maxDelay, window)
            self.maxAge = maxAge
            self.endedRetention = endedRetention
            self.defaultPriority = defaultPriority
            self.idempotencyWindow = idempotencyWindow
            self.maxRememberedIDs = max(0, maxRememberedIDs)
            self.priority10PerHour = priority10PerHour.map { max(0, $0) }
        }

        /// The priority-10 budget of an activity of `app`; nil: none.
        public func priority10PerHour(for app: String?) -> Int? {
            guard let app, let own = priority10PerHourByApp[app] else { return priority10PerHour }
            return own
        }
    }

    /// One push to make now: the push, the state snapshot to write once it
    /// has reached every token, and the command offsets it covers.
    public struct Flush: Sendable, Hashable {
        public var push: LiveActivityPush {
            didSet { payload = nil }
        }
        public var snapshot: ActivityState
        public var offsets: [Int64]
        /// The traced commands it merged, the newest last; empty when none
        /// was traced.
        public var traces: [CommandTrace]
        /// The ids of the commands it merged that have one, oldest first, at
        /// most ``maxCommandIDs`` (the newest kept).
        public var commandIDs: [String] = []
        /// When the coalescer flushed it.
        public var flushedAt: UnixTime
        /// The push's payload for a device when the coalescer already wrote
        /// it (the size check of the last command merged), so the push is
        /// not written again; nil once `push` is changed.
        public private(set) var payload: [UInt8]?

        /// Most command ids a flush (and the outcome of its push) names.
        public static let maxCommandIDs = 100

        /// `newer` after `older`, the newest ``maxCommandIDs`` kept.
        public static func appending(_ newer: [String], to older: [String]) -> [String] {
            let all = older + newer
            return all.count > maxCommandIDs ? Array(all.suffix(maxCommandIDs)) : all
        }

        public init(
            push: LiveActivityPush, snapshot: ActivityState, offsets: [Int64], payload: [UInt8]? = nil, traces: [CommandTrace] = [],
            flushedAt: UnixTime = UnixTime(seconds: 0)
        ) {
            self.push = push
            self.snapshot = snapshot
            self.offsets = offsets
            self.payload = payload
            self.traces = traces
            self.flushedAt = flushedAt
        }
    }

    /// What to do after ``receive(_:offset:recordTime:now:)``.
    public enum ReceiveAction: Sendable, Hashable {
        /// The command was folded into the state before (a re-delivery);
        /// its offset is done.
        case alreadyApplied
        /// A command with this id was applied within the idempotency window:
        /// acknowledged, not applied; its offset is done.
        case duplicate(commandID: String)
        /// The command cannot apply; dead-letter it (with `details`), then
        /// its offset is done. The activity's state is as before it.
        case reject(DeadLetterReason, message: String, details: [String: JSONValue])
        /// Merged and held; make sure ``timerFired(for:now:)`` runs at this time.
        case scheduleFlush(at: UnixTime)
        /// Push now.
        case flush(Flush)
    }

    /// What to do when a flush timer fires.
    public enum TimerAction: Sendable, Hashable {
        /// Nothing is held for this activity (already flushed or gone).
        case none
        /// The timer fired early or the window moved; fire again then.
        case reschedule(at: UnixTime)
        case flush(Flush)
    }

    /// Updates merged since the last flush of one activity.
    struct Held: Sendable, Hashable {
        var firstAt: UnixTime
        var deadline: UnixTime
        var eventTime: UnixTime
        var alert: ActivityAlert?
        var priority: PushPriority?
        var offsets: [Int64]
        var traces: [CommandTrace] = []
        var commandIDs: [String] = []
        /// The payload the flush of what is held will carry, written by the
        /// size check of the last command merged.
        var payload: [UInt8]?
    }

    struct Entry: Sendable, Hashable {
        var state: ActivityState
        var held: Held?
    }

    public let configuration: Configuration
    /// The declared activity types every command is checked against, on
    /// the state it makes (a merge patch on the merged state).
    public var types: ActivityTypes = .none
    private(set) var entries: [ActivityID: Entry] = [:]

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The activity's current merged state, including held updates.
    public func state(of activityID: ActivityID) -> ActivityState? {
        entries[activityID]?.state
    }

    /// The activity's version (pushes made so far); 0 for one not known.
    public func version(of activityID: ActivityID) -> UInt64 {
        entries[activityID]?.state.version ?? 0
    }

    /// Activities known, live or ended.
    public var activityCount: Int { entries.count }

    /// Activities with updates held for a flush.
    public var heldActivities: [ActivityID] {
        entries.compactMap { $0.value.held == nil ? nil : $0.key }
    }

    /// The earliest time a held activity is due to flush.
    public var nextDeadline: UnixTime? {
        entries.values.compactMap(\.held?.deadline).min()
    }

    /// Installs a snapshot read back from the `state` changelog, replacing
    /// whatever was known of that activity.
    public mutating func restore(_ snapshot: ActivityState) {
        entries[snapshot.activityID] = Entry(state: snapshot, held: nil)
    }

    /// Applies one command, read at `offset` of its partition. `recordTime`
    /// is the Kafka record's time, the event time when the command has none.
    ///
    /// An update whose dismissal date had passed when it arrived
    /// (`recordTime`) ends the activity, as Braze documents. `delivery`
    /// is where the activity's pushes go: a broadcast activity's may be
    /// larger than a device's.
    public mutating func receive(
        _ command: ActivityCommand, offset: Int64, recordTime: UnixTime, now: UnixTime, delivery: APNsPayload.Delivery = .device
    ) -> ReceiveAction {
        let command = command.endingIfDismissed(arrivedAt: recordTime)
        let id = command.activityID
        // Taken out of the dictionary while looked at and mutated (one
        // lookup, and its storage is not copied); put back unless replaced.
        let original = entries.removeValue(forKey: id)
        if let refusal = Self.refusal(of: command, offset: offset, known: original?.state, now: now, configuration: configuration) {
            if let original { entries[id] = original }
            return refusal
        }
        var entry = original ?? Entry(state: ActivityState(activityID: id, createdAt: now), held: nil)

        let eventTime = command.timestamp ?? recordTime
        entry.state.lastOffset = offset
        entry.state.remember(command, at: now, since: now + -configuration.idempotencyWindow, limit: configuration.maxRememberedIDs)
        entry.state.fold(command, now: now)
        if let refusal = types.refusal(of: command, known: original?.state.attributesType, merged: entry.state.contentState) {
            if let original { entries[id] = original }
            return .reject(
                refusal.reason,
                message: "\(command.event.rawValue) at offset \(offset) \(refusal.message); it is not applied and the previous state stays",
                details: refusal.details)
        }

        var held = entry.held ?? Held(firstAt: now, deadline: now, eventTime: eventTime, offsets: [])
        held.eventTime = max(held.eventTime, eventTime)
        if let alert = command.alert { held.alert = alert }
        if let priority = command.priority { held.priority = max(held.priority ?? priority, priority) }
        held.offsets.append(offset)
        if let commandID = command.id { held.commandIDs = Flush.appending([commandID], to: held.commandIDs) }
        if let trace = command.trace {
            held.traces = CommandTrace.appending([CommandTrace(context: trace, offset: offset, heldSince: now)], to: held.traces)
        }

        // A state whose push APNs would refuse is never taken: every later
        // update would carry it and fail too. The command is refused and
        // the state stays as it was.
        var probe = entry
        probe.held = held
        do {
            held.payload = try APNsPayload.checked(
                APNsPayload.bytes(for: Self.flush(&probe, event: command.event, command: command, now: now, configuration: configuration).push),
                of: id, for: delivery)
        } catch {
            if let original { entries[id] = original }
            return .reject(
                .payloadTooLarge,
                message: "\(error); \(command.event.rawValue) at offset \(offset) is not applied and the previous state stays",
                details: ["size": .integer(Int64(error.size)), "limit": .integer(Int64(error.limit))])
        }

        switch command.event {
        case .start, .end:
            if command.event == .end { entry.state.endedAt = now }
            entry.held = held
            let flush = Self.flush(&entry, event: command.event, command: command, now: now, configuration: configuration)
            entries[id] = entry
            return .flush(flush)
        case .update:
            let latest = held.firstAt + configuration.maxDelay
            held.deadline = min(now + configuration.window, latest)
            entry.held = held
            if held.deadline <= now {
                let flush = Self.flush(&entry, event: .update, command: nil, now: now, configuration: configuration)
                entries[id] = entry
                return .flush(flush)
            }
            entries[id] = entry
            return .scheduleFlush(at: held.deadline)
        }
    }

    /// Why `command` is not applied to the activity's state `known` (nil:
    /// the activity has none), or nil when it is.
    private static func refusal(
        of command: ActivityCommand, offset: Int64, known: ActivityState?, now: UnixTime, configuration: Configuration
    ) -> ReceiveAction? {
        let id = command.activityID
        guard let known else {
            guard command.event == .end else { return nil }
            return .reject(
                .invalidCommand, message: "end at offset \(offset) for activity \(id), which has no state: there is nothing to end",
                details: [:])
        }
        if let lastOffset = known.lastOffset, offset <= lastOffset {
            return .alreadyApplied
        }
        // 0 remembers none: what an earlier snapshot remembered counts no more.
        if configuration.maxRememberedIDs > 0, let commandID = command.id,
           known.remembers(command, since: now + -configuration.idempotencyWindow)
        {
            return .duplicate(commandID: commandID)
        }
        if let app = command.app, let owner = known.app, app != owner {
            return .reject(
                .invalidCommand,
                message: "app: \(command.event.rawValue) at offset \(offset) names app \(app.debugDescription), but activity \(id) belongs to app \(owner.debugDescription)",
                details: ["field": .string("app")])
        }
        if let endedAt = known.endedAt {
            return .reject(
                .activityEnded,
                message: "activity \(id) ended at \(endedAt); \(command.event.rawValue) at offset \(offset) is not applied", details: [:])
        }
        return nil
    }

    /// A flush timer for `activityID` fired. Early, stale and repeated
    /// firings are harmless: only held updates past their deadline flush.
    public mutating func timerFired(for activityID: ActivityID, now: UnixTime) -> TimerAction {
        // One lookup; the entry is flushed in place.
        guard let index = entries.index(forKey: activityID), let deadline = entries.values[index].held?.deadline else { return .none }
        guard deadline <= now else { return .reschedule(at: deadline) }
        return .flush(Self.flush(&entries.values[index], event: .update, command: nil, now: now, configuration: configuration))
    }

    /// Flushes the update `activityID` holds now, before its window closes;
    /// nil when it holds none.
    public mutating func flushNow(_ activityID: ActivityID, now: UnixTime) -> Flush? {
        guard let index = entries.index(forKey: activityID), entries.values[index].held != nil else { return nil }
        return Self.flush(&entries.values[index], event: .update, command: nil, now: now, configuration: configuration)
    }

    /// Flushes everything held at once, as on shutdown or revocation drain.
    public mutating func flushAll(now: UnixTime) -> [Flush] {
        var flushes: [Flush] = []
        for id in entries.keys.sorted() {
            guard entries[id]?.held != nil, var entry = entries.removeValue(forKey: id) else { continue }
            flushes.append(Self.flush(&entry, event: .update, command: nil, now: now, configuration: configuration))
            entries[id] = entry
        }
        return flushes
    }

    /// Forgets an activity (its state and tokens are dropped): the offsets
    /// of the updates it still held, which are done.
    @discardableResult
    public mutating func remove(_ activityID: ActivityID) -> [Int64] {
        entries.removeValue(forKey: activityID)?.held?.offsets ?? []
    }

    /// Whether updates of the activity are held for a flush.
    public func isHolding(_ activityID: ActivityID) -> Bool {
        entries[activityID]?.held != nil
    }

    /// Begins a new life for an ended activity's id: an empty state whose
    /// versions and timestamps go on from `marker`'s, so no device sees
    /// a version or time go back.
    public mutating func begin(_ activityID: ActivityID, after marker: ActivityLifecycle.Marker, now: UnixTime) {
        entries[activityID] = Entry(
            state: ActivityState(
                activityID: activityID, version: marker.version, timestamp: marker.timestamp, createdAt: now, lastOffset: marker.lastOffset),
            held: nil)
    }

    private static func flush(
        _ entry: inout Entry, event: ActivityEvent, command: ActivityCommand?, now: UnixTime, configuration: Configuration
    ) -> Flush {
        let held = entry.held ?? Held(firstAt: UnixTime(seconds: 0), deadline: UnixTime(seconds: 0), eventTime: UnixTime(seconds: 0), offsets: [])
        entry.held = nil
        var state = entry.state
        let timestamp = max(state.timestamp ?? held.eventTime, held.eventTime)
        state.timestamp = timestamp
        state.version += 1
        let requested = held.priority ?? configuration.defaultPriority
        let priority = Self.budgeted(requested, event: event, alert: held.alert, state: &state, now: now, configuration: configuration)
        entry.state = state
        // An end's stale date, relevance and dismissal date are its own command's (``receive``).
        let ending = event == .end
        // Attributes travel with every version (the encoder writes them only
        // for a start), so a token that never got its start can be sent one.
        let push = LiveActivityPush(
            activityID: state.activityID,
            version: state.version,
            event: event,
            contentState: state.contentState,
            timestamp: timestamp,
            priority: priority,
            staleDate: state.staleDate,
            dismissalDate: ending ? state.dismissalDate : nil,
            relevanceScore: state.relevanceScore,
            alert: held.alert,
            attributesType: state.attributesType,
            attributes: state.attributes,
            inputPushToken: event == .start ? command?.inputPushToken : nil,
            inputPushChannel: event == .start ? command?.inputPushChannel : nil,
            downgradedFrom: priority == requested ? nil : requested)
        var flush = Flush(push: push, snapshot: state, offsets: held.offsets, payload: held.payload)
        flush.commandIDs = held.commandIDs
        flush.flushedAt = now
        if !held.traces.isEmpty { flush.trace(held.traces) }
        return flush
    }

    /// The priority budget: an activity's priority-10 pushes in the last
    /// hour are counted in its state; past `priority10PerHour`, an update
    /// without an alert goes at priority 5 (starts, ends and alerts keep 10).
    private static func budgeted(
        _ requested: PushPriority, event: ActivityEvent, alert: ActivityAlert?, state: inout ActivityState, now: UnixTime,
        configuration: Configuration
    ) -> PushPriority {
        guard let budget = configuration.priority10PerHour(for: state.app), requested == .immediate else { return requested }
        let hourAgo = now + -3600
        state.priority10SentAt.removeAll { $0 <= hourAgo }
        if event == .update, alert == nil, state.priority10SentAt.count >= budget {
            return .normal
        }
        state.priority10SentAt.append(now)
        // Only the newest `budget` times decide whether the next is over it.
        if state.priority10SentAt.count > budget { state.priority10SentAt.removeFirst(state.priority10SentAt.count - budget) }
        return requested
    }
}
