import LiveDispatchCore
import Synchronization

/// The commands this worker's HTTP API accepted (produced to `commands`)
/// that the activity's state here does not show yet, so the next request
/// is judged on the state they make, not on the state before them: two
/// updates of 2.5 KB sent back to back make a 5 KB state, and the second is
/// answered 413 instead of 202 and a dead letter.
///
/// A command stops counting once the state this worker reads remembers its
/// id (the dispatcher applied it), or `lifetime` after it was accepted
/// (the dispatcher is another worker, or behind). At most `maxActivities`
/// activities and `maxPerActivity` commands each are kept, the oldest
/// forgotten first: forgetting only makes the check what it was without
/// them, the dispatcher still judges every command.
struct AcceptedCommands: Sendable {
    struct Configuration: Sendable {
        var lifetime: Duration = .seconds(5)
        var maxActivities = 4096
        var maxPerActivity = 32
    }

    /// What the accepted commands make of an activity's state.
    struct Projection: Sendable {
        /// The state read here with the accepted commands it does not show
        /// folded in; nil when there is neither.
        var state: ActivityState?
        /// Whether `state` is the activity's whole state: one read here, or
        /// made whole by an accepted start or `replace_state`. A merge patch
        /// folded into nothing is not (its other fields are not known).
        var isWhole: Bool
        /// Whether accepted commands not shown by the state read here count.
        var hasPending: Bool
    }

    private struct Pending: Sendable {
        var command: ActivityCommand
        var acceptedAt: UnixTime
    }

    let configuration: Configuration
    private var pending: [ActivityID: [Pending]] = [:]

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Activities with accepted commands kept.
    var activityCount: Int { pending.count }

    /// What the commands accepted for `activity` and not shown by `current`
    /// (its state as read here, nil when none) make of it at `now`;
    /// forgets those applied or expired.
    mutating func projection(of activity: ActivityID, current: ActivityState?, now: UnixTime) -> Projection {
        let oldest = now + -configuration.lifetime.seconds
        var kept = pending.removeValue(forKey: activity) ?? []
        kept.removeAll { entry in
            entry.acceptedAt <= oldest || entry.acceptedAt > now
                || (entry.command.id.map { current?.remembers($0, since: UnixTime(seconds: 0)) ?? false } ?? false)
        }
        guard !kept.isEmpty else { return Projection(state: current, isWhole: current != nil, hasPending: false) }
        pending[activity] = kept
        var state = current ?? ActivityState(activityID: activity, createdAt: kept[0].acceptedAt)
        var isWhole = current != nil
        for entry in kept {
            state.fold(entry.command, now: entry.acceptedAt)
            if entry.command.event == .start || entry.command.replaceState { isWhole = true }
            if entry.command.event == .end, state.endedAt == nil { state.endedAt = entry.acceptedAt }
        }
        return Projection(state: state, isWhole: isWhole, hasPending: true)
    }

    /// Counts `command`, accepted at `now`, until it is applied or expires.
    mutating func accept(_ command: ActivityCommand, now: UnixTime) {
        let activity = command.activityID
        var kept = pending.removeValue(forKey: activity) ?? []
        kept.append(Pending(command: command, acceptedAt: now))
        if kept.count > configuration.maxPerActivity { kept.removeFirst(kept.count - configuration.maxPerActivity) }
        if pending.count >= configuration.maxActivities { forgetOldest(now: now) }
        pending[activity] = kept
    }

    /// Stops counting `command`: Kafka did not take it.
    mutating func withdraw(_ command: ActivityCommand) {
        guard var kept = pending.removeValue(forKey: command.activityID) else { return }
        if let index = kept.lastIndex(where: { $0.command == command }) { kept.remove(at: index) }
        if !kept.isEmpty { pending[command.activityID] = kept }
    }

    /// Makes room for one activity: drops the expired ones, else the one
    /// whose latest command is oldest.
    private mutating func forgetOldest(now: UnixTime) {
        let oldest = now + -configuration.lifetime.seconds
        pending = pending.filter { $0.value.last.map { $0.acceptedAt > oldest } ?? false }
        guard pending.count >= configuration.maxActivities,
            let stalest = pending.min(by: { ($0.value.last?.acceptedAt ?? now) < ($1.value.last?.acceptedAt ?? now) })?.key
        else { return }
        pending[stalest] = nil
    }
}

/// ``AcceptedCommands`` under one lock, shared by the requests of one server.
final class AcceptedCommandsBox: Sendable {
    private let machine: Mutex<AcceptedCommands>

    init(configuration: AcceptedCommands.Configuration = .init()) {
        machine = Mutex(AcceptedCommands(configuration: configuration))
    }

    func withLock<T: Sendable>(_ body: (inout AcceptedCommands) -> T) -> T {
        machine.withLock { body(&$0) }
    }
}
