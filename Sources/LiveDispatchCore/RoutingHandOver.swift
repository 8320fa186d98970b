/// Which domain partitions a router keeps routing after its group took them
/// away, until their new owner routes them.
///
/// With cooperative rebalancing a partition that moves is revoked in one
/// round and given to its new owner in the next, and a broker can take
/// seconds between the two. Nobody would route the partition meanwhile, and
/// every activity fed by it would wait, including those whose own partition
/// does not move. Routing it twice is safe: the commands a rule makes of an
/// event carry the event's topic, partition and offset, and the dispatcher
/// applies each once (``ActivityState/SourceMark``), so the old owner goes
/// on reading from where it stopped, writing commands and never committing,
/// and stops once the group's committed offsets show that the new owner has
/// caught up with it: the new owner starts from the last commit, before
/// what this router routed meanwhile, so the first commit past the
/// revocation point sets a target (the next offset after what was routed
/// here by then), and the hand-over ends when the group commits that far.
/// It also ends when the partition comes back, or after ``limit``.
///
/// A router leaving its group (its worker stops) hands over every partition
/// it routes the same way (``leaving(_:now:within:)``), within a shorter
/// bound, and also stops a partition that has had nothing to route for
/// ``quietWhenLeaving``: an idle partition has no new owner's commit to wait
/// for, and its next event waits little for that owner.
///
/// A value type: the router feeds it revocations, assignments, the group's
/// committed offsets and the time, and performs the actions it returns; it
/// keeps one timer armed at ``nextDeadline`` and calls ``expire(now:)``
/// when it fires. Its time is the router's monotonic clock (the event
/// loop's uptime): its deadlines are bounds on waits, from no record.
public struct RoutingHandOver<Partition: Hashable & Sendable>: Sendable {
    public enum Action: Sendable, Equatable {
        /// Read `partition` from `offset` (the next one to read), routing without committing.
        case start(Partition, from: Int64)
        /// Stop reading `partition`.
        case stop(Partition, Reason)
    }

    public enum Reason: Sendable, Equatable {
        /// The group committed past where this router stopped: the new owner routes it.
        case newOwnerRoutes
        /// The group gave the partition back to this router.
        case assignedAgain
        /// ``limit`` passed without a sign of the new owner.
        case timedOut
        /// The router is shutting down.
        case stopping
        /// The router is leaving and read nothing of it for ``quietWhenLeaving``.
        case quiet
    }

    struct Lingering: Sendable {
        /// The next offset this router would have read when the partition was revoked.
        var from: Int64
        var since: UnixTime
        /// When a record of it was last routed here (or `since`).
        var lastRouted: UnixTime
        /// The last offset routed here.
        var routedUpTo: Int64?
        /// Set when the new owner is first seen routing: where it must commit to for this router to stop.
        var target: Int64?
    }

    /// The longest a released partition is routed here.
    public let limit: Duration
    private var lingering: [Partition: Lingering] = [:]
    private var stopping = false
    /// Set once the router leaves its group: when every hand-over ends at the latest.
    private var leavingDeadline: UnixTime?
    /// While leaving, a partition with nothing routed this long stops.
    public static var quietWhenLeaving: Duration { .seconds(1) }

    public init(limit: Duration) {
        self.limit = limit
    }

    /// The partitions routed here without being owned.
    public var partitions: [Partition] { Array(lingering.keys) }

    /// Nothing is routed here without being owned.
    public var isIdle: Bool { lingering.isEmpty }

    /// The group revoked `partition`; `lastRead` is the last offset read
    /// from it (nil when nothing was: there is no position to go on from).
    public mutating func revoked(_ partition: Partition, lastRead: Int64?, now: UnixTime) -> Action? {
        guard !stopping, leavingDeadline == nil, let lastRead, lingering[partition] == nil else { return nil }
        lingering[partition] = Lingering(from: lastRead + 1, since: now, lastRouted: now)
        return .start(partition, from: lastRead + 1)
    }

    /// The router leaves its group (its worker stops): each partition it
    /// still owns, with the last offset read from it, is routed on until its
    /// new owner routes it, it is quiet, or `within` has passed. Revocations
    /// after this start nothing.
    public mutating func leaving(_ owned: [(partition: Partition, lastRead: Int64?)], now: UnixTime, within: Duration) -> [Action] {
        guard !stopping, leavingDeadline == nil else { return [] }
        let actions = owned.compactMap { revoked($0.partition, lastRead: $0.lastRead, now: now) }
        leavingDeadline = now + within.seconds
        return actions
    }

    /// A record of a lingering partition, at `offset`, was routed here.
    public mutating func routed(_ partition: Partition, offset: Int64, now: UnixTime) {
        guard var entry = lingering[partition] else { return }
        entry.lastRouted = now
        entry.routedUpTo = max(entry.routedUpTo ?? offset, offset)
        lingering[partition] = entry
    }

    /// The group assigned `partition` to this router.
    public mutating func assigned(_ partition: Partition) -> Action? {
        lingering.removeValue(forKey: partition) == nil ? nil : .stop(partition, .assignedAgain)
    }

    /// The group's committed next-offsets of lingering partitions.
    public mutating func committed(_ offsets: [Partition: Int64]) -> [Action] {
        var actions: [Action] = []
        for (partition, offset) in offsets {
            guard var entry = lingering[partition], offset > entry.from else { continue }
            let target = entry.target ?? max(entry.from, (entry.routedUpTo ?? entry.from) + 1)
            guard offset >= target else {
                entry.target = target
                lingering[partition] = entry
                continue
            }
            lingering[partition] = nil
            actions.append(.stop(partition, .newOwnerRoutes))
        }
        return actions
    }

    /// When ``expire(now:)`` next has something to stop: the earliest
    /// limit of a lingering partition and, while leaving, the leaving bound
    /// and the earliest end of a quiet spell. Nil when nothing lingers.
    public var nextDeadline: UnixTime? {
        lingering.values.lazy.map { entry in
            guard let leavingDeadline else { return entry.since + limit.seconds }
            return min(entry.since + limit.seconds, leavingDeadline, entry.lastRouted + Self.quietWhenLeaving.seconds)
        }.min()
    }

    /// Stops what has lingered ``limit`` or longer at `now`.
    /// While leaving, also what passed the leaving bound or was quiet.
    public mutating func expire(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for (partition, entry) in lingering {
            if now >= entry.since + limit.seconds || leavingDeadline.map({ now >= $0 }) == true {
                actions.append(.stop(partition, .timedOut))
            } else if leavingDeadline != nil, now >= entry.lastRouted + Self.quietWhenLeaving.seconds {
                actions.append(.stop(partition, .quiet))
            }
        }
        for case .stop(let partition, _) in actions { lingering[partition] = nil }
        return actions
    }

    /// The router shuts down: stop everything and start nothing more.
    public mutating func stop() -> [Action] {
        stopping = true
        let all = Array(lingering.keys)
        lingering.removeAll()
        return all.map { .stop($0, .stopping) }
    }
}
