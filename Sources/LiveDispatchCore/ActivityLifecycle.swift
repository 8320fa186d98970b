/// The life of each activity of a partition, from its first command until
/// its id is forgotten: one machine, so that an end reaches every device
/// before anything is dropped, and an ended id never comes back by
/// accident (semantic 5). The table of its phases and events is in
/// docs/design.md ("Activity lifecycle").
///
/// What each version holds is the ``Coalescer``'s; which token has which
/// version is each activity's ``FanOut``'s. This machine decides only
/// when an activity moves on: ended, its end delivered (or reported) on
/// every token, dismissed (state and tokens dropped, a small marker kept),
/// and forgotten (the marker dropped, `activity.max_age` after its end).
/// A dismissed marker is written to the `state` changelog in place of the
/// snapshot, so the id stays ended across restarts and owners.
///
/// A `start` for an ended id begins a new life once the old end has
/// reached every token: the old life's update tokens are dropped (they
/// belonged to the activity that ended on the device) and versions go on
/// from the old ones, so no device ever sees a version go back. Any other
/// command for an ended id is refused `activity-ended`.
public struct ActivityLifecycle: Sendable {
    /// How long lives last (`activity.*`).
    public struct Configuration: Sendable, Hashable {
        /// Age after which a live activity is expired, and how long an
        /// ended id is remembered after its end (`activity.max_age`).
        public var maxAge: Double
        /// How long an ended activity without a dismissal date stays.
        public var endedRetention: Double

        public init(maxAge: Double = 12 * 3600, endedRetention: Double = 4 * 3600) {
            self.maxAge = maxAge
            self.endedRetention = endedRetention
        }
    }

    /// Where one activity is in its life.
    public enum Phase: Sendable, Hashable {
        /// Started or updated: pushes flow. Expired `maxAge` after `createdAt`.
        case live(createdAt: UnixTime)
        /// Ended: the end (version ``Ending/version``) is still reaching its tokens.
        case ending(Ending)
        /// The end reached every token (delivered, or dead-lettered with a
        /// `failed` outcome): kept, with its tokens, until its dismissal.
        case ended(Ending)
        /// State and tokens dropped; only the id is kept, as ended.
        case dismissed(Marker)
    }

    /// An ended activity: when, which version is its end, when it goes.
    public struct Ending: Sendable, Hashable {
        public var endedAt: UnixTime
        public var version: UInt64
        /// Its dismissal date, or `endedRetention` after the end, at most
        /// `maxAge` after it was created (iOS has removed it by then).
        public var dismissAt: UnixTime
    }

    /// What stays of a dismissed activity: enough to refuse late commands,
    /// to know a re-delivered one, and to start the id again above its
    /// last version and timestamp.
    public struct Marker: Sendable, Hashable {
        public var endedAt: UnixTime
        public var dismissedAt: UnixTime
        public var version: UInt64
        public var timestamp: UnixTime?
        public var lastOffset: Int64?
        /// `maxAge` after the end: then the id is forgotten.
        public var forgetAt: UnixTime
    }

    /// What to do with a command for an activity, before its state is touched.
    public enum Admission: Sendable, Hashable {
        /// Apply it to the activity's state as usual.
        case apply
        /// A re-delivery of a command the dismissed activity had applied.
        case alreadyApplied
        /// A start for a dismissed id: a new life begins after `marker`.
        case restart(after: Marker)
        /// Refuse it (`activity-ended`), with this message.
        case refuse(message: String)
    }

    /// What a start for an ended activity whose state is still held does.
    public enum Restart: Sendable, Hashable {
        /// Drop the old life (its state and tokens) and start again after it.
        case begin(after: Marker)
        /// Its end is still reaching devices: refused, with this message.
        case refuse(message: String)
    }

    /// Why an activity's state and tokens were dropped.
    public enum ExpiryReason: String, Sendable, Hashable, CaseIterable {
        /// Ended, its end done on every token, and its dismissal date passed.
        case dismissed
        /// Older than `activity.max_age`.
        case maxAge = "max-age"
    }

    /// What the sweep does with one activity.
    public enum Step: Sendable, Hashable {
        /// Older than `maxAge`: drop its state and tokens (tombstones).
        case expire(ActivityID)
        /// Ended, its end done on every token, its dismissal reached: drop
        /// its state and tokens, and write ``dismiss(_:now:)``'s marker in
        /// place of its snapshot.
        case dismiss(ActivityID)
        /// `maxAge` after its end: drop the marker (a tombstone).
        case forget(ActivityID)
    }

    public let configuration: Configuration
    private var phases: [ActivityID: Phase] = [:]

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public func phase(of activity: ActivityID) -> Phase? { phases[activity] }

    /// Dismissed ids remembered as ended.
    public var markerCount: Int {
        phases.values.reduce(0) { count, phase in
            if case .dismissed = phase { count + 1 } else { count }
        }
    }

    // MARK: Restore

    /// Takes an activity's phase from its snapshot read back from `state`:
    /// a marker, an ended state (a snapshot is written once its push
    /// reached every token, so its end did), or a live one.
    public mutating func restore(_ snapshot: ActivityState) {
        phases[snapshot.activityID] = Self.phase(of: snapshot, configuration: configuration)
    }

    /// A tombstone read back from `state`: nothing is known of the id.
    public mutating func forget(_ activity: ActivityID) {
        phases.removeValue(forKey: activity)
    }

    static func phase(of snapshot: ActivityState, configuration: Configuration) -> Phase {
        guard let endedAt = snapshot.endedAt else { return .live(createdAt: snapshot.createdAt) }
        if let dismissedAt = snapshot.dismissedAt {
            return .dismissed(Marker(
                endedAt: endedAt, dismissedAt: dismissedAt, version: snapshot.version, timestamp: snapshot.timestamp,
                lastOffset: snapshot.lastOffset, forgetAt: endedAt + configuration.maxAge))
        }
        return .ended(ending(of: snapshot, endedAt: endedAt, configuration: configuration))
    }

    private static func ending(of state: ActivityState, endedAt: UnixTime, configuration: Configuration) -> Ending {
        let dismissal = state.dismissalDate ?? endedAt + configuration.endedRetention
        return Ending(endedAt: endedAt, version: state.version, dismissAt: min(dismissal, state.createdAt + configuration.maxAge))
    }

    // MARK: Commands

    /// Whether a command read at `offset` may touch the activity's state.
    /// Only a dismissed id decides here; an ended activity whose state is
    /// held refuses later commands through its state (after its
    /// idempotency check), and a start for it asks ``restart(_:now:)``.
    public func admission(of command: ActivityCommand, offset: Int64) -> Admission {
        guard case .dismissed(let marker)? = phases[command.activityID] else { return .apply }
        if let lastOffset = marker.lastOffset, offset <= lastOffset { return .alreadyApplied }
        if command.event == .start { return .restart(after: marker) }
        return .refuse(
            message: "activity \(command.activityID) ended at \(marker.endedAt) and was dismissed at \(marker.dismissedAt); \(command.event.rawValue) at offset \(offset) is not applied (a start begins the id again)")
    }

    /// A start for an ended activity whose state is still held.
    public mutating func restart(_ state: ActivityState, now: UnixTime) -> Restart {
        if case .ending(let ending)? = phases[state.activityID] {
            return .refuse(
                message: "activity \(state.activityID) ended at \(ending.endedAt) and its end is still being delivered; send the start again once it has been (the end's outcome says when)")
        }
        // Ended (or a state that says so): its end was delivered.
        return .begin(after: marker(of: state, dismissedAt: now))
    }

    /// What stays of `state` once dismissed at `now`.
    private func marker(of state: ActivityState, dismissedAt now: UnixTime) -> Marker {
        let endedAt = state.endedAt ?? now
        return Marker(
            endedAt: endedAt, dismissedAt: now, version: state.version, timestamp: state.timestamp, lastOffset: state.lastOffset,
            forgetAt: endedAt + configuration.maxAge)
    }

    /// The coalescer took a command: `state` is the activity's state after it.
    public mutating func applied(_ state: ActivityState) {
        let activity = state.activityID
        switch phases[activity] {
        case .ending?, .ended?:
            return
        case .live?, .dismissed?, nil:
            if let endedAt = state.endedAt {
                phases[activity] = .ending(Self.ending(of: state, endedAt: endedAt, configuration: configuration))
            } else if case .live? = phases[activity] {
                return
            } else {
                phases[activity] = .live(createdAt: state.createdAt)
            }
        }
    }

    /// Every token of the activity has version `through` (delivered, given
    /// up on, or removed): an end that far is done.
    public mutating func completed(_ activity: ActivityID, through: UInt64) {
        guard case .ending(let ending)? = phases[activity], through >= ending.version else { return }
        phases[activity] = .ended(ending)
    }

    // MARK: Sweep

    /// What is due at `now`, by activity id. `isIdle` says whether an
    /// activity has nothing held, in flight, waiting for a retry or for an
    /// acknowledgement: an activity is dropped only then, so no version is
    /// abandoned half delivered (the retry policy bounds how long that
    /// takes). The owner performs each step and reports it
    /// (``dismiss(_:now:)``, ``forget(_:)``).
    public func due(now: UnixTime, isIdle: (ActivityID) -> Bool) -> [Step] {
        var steps: [Step] = []
        for (activity, phase) in phases {
            switch phase {
            case .live(let createdAt):
                if now >= createdAt + configuration.maxAge, isIdle(activity) { steps.append(.expire(activity)) }
            case .ending:
                continue
            case .ended(let ending):
                if now >= ending.dismissAt, isIdle(activity) { steps.append(.dismiss(activity)) }
            case .dismissed(let marker):
                if now >= marker.forgetAt { steps.append(.forget(activity)) }
            }
        }
        return steps.sorted { Self.activity(of: $0) < Self.activity(of: $1) }
    }

    /// Dismisses the ended activity whose last state is `state`: the
    /// marker to write in place of its snapshot.
    public mutating func dismiss(_ state: ActivityState, now: UnixTime) -> Marker {
        let marker = marker(of: state, dismissedAt: now)
        phases[state.activityID] = .dismissed(marker)
        return marker
    }

    /// A new life began for `activity` (a start after its end).
    public mutating func restarted(_ activity: ActivityID, createdAt: UnixTime) {
        phases[activity] = .live(createdAt: createdAt)
    }

    private static func activity(of step: Step) -> ActivityID {
        switch step {
        case .expire(let activity), .dismiss(let activity), .forget(let activity): activity
        }
    }
}

extension ActivityCommand {
    /// This command as the worker applies it: an update whose dismissal
    /// date had passed when it arrived at `arrival` ends the activity now
    /// ("if this time is in the past, the Live Activity will be removed
    /// immediately", Braze), with that dismissal date.
    public func endingIfDismissed(arrivedAt arrival: UnixTime) -> ActivityCommand {
        guard event == .update, let dismissalDate, dismissalDate <= arrival else { return self }
        var ending = self
        ending.event = .end
        return ending
    }
}
