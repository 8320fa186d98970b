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
/// and stops as soon as the group's committed offset shows that the new
/// owner has routed past that point, when the partition comes back to it,
/// or after ``limit``.
///
/// A value type: the router feeds it revocations, assignments, the group's
/// committed offsets and the time, and performs the actions it returns.
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
    }

    struct Lingering: Sendable {
        /// The next offset this router would have read when the partition was revoked.
        var from: Int64
        var since: ContinuousClock.Instant
    }

    /// The longest a released partition is routed here.
    public let limit: Duration
    private var lingering: [Partition: Lingering] = [:]
    private var stopping = false

    public init(limit: Duration) {
        self.limit = limit
    }

    /// The partitions routed here without being owned.
    public var partitions: [Partition] { Array(lingering.keys) }

    /// The group revoked `partition`; `lastRead` is the last offset read
    /// from it (nil when nothing was: there is no position to go on from).
    public mutating func revoked(_ partition: Partition, lastRead: Int64?, now: ContinuousClock.Instant) -> Action? {
        guard !stopping, let lastRead, lingering[partition] == nil else { return nil }
        lingering[partition] = Lingering(from: lastRead + 1, since: now)
        return .start(partition, from: lastRead + 1)
    }

    /// The group assigned `partition` to this router.
    public mutating func assigned(_ partition: Partition) -> Action? {
        lingering.removeValue(forKey: partition) == nil ? nil : .stop(partition, .assignedAgain)
    }

    /// The group's committed next-offsets of lingering partitions.
    public mutating func committed(_ offsets: [Partition: Int64]) -> [Action] {
        var actions: [Action] = []
        for (partition, offset) in offsets {
            guard let entry = lingering[partition], offset > entry.from else { continue }
            lingering[partition] = nil
            actions.append(.stop(partition, .newOwnerRoutes))
        }
        return actions
    }

    /// Stops what has lingered ``limit`` or longer at `now`.
    public mutating func expire(now: ContinuousClock.Instant) -> [Action] {
        let expired = lingering.filter { now - $0.value.since >= limit }.map(\.key)
        for partition in expired { lingering[partition] = nil }
        return expired.map { .stop($0, .timedOut) }
    }

    /// The router shuts down: stop everything and start nothing more.
    public mutating func stop() -> [Action] {
        stopping = true
        let all = Array(lingering.keys)
        lingering.removeAll()
        return all.map { .stop($0, .stopping) }
    }
}
