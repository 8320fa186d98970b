/// How a worker shares its limit on sends in flight
/// (`limits.max_in_flight_per_worker`) among the partitions it owns.
///
/// An even split would cap one huge activity, which lives in one partition,
/// at the limit divided by the partitions (about 680 of 4,096 over 6): far
/// below what the connections carry when APNs is a long round trip away.
/// So the shares follow demand: while no partition has senders waiting for
/// a place, every partition gets an even share; once some do, each of the
/// others keeps what it has in flight, and at least a reserve (a quarter of
/// the even share) so that it can start sending at once, and the partitions
/// with senders waiting split the rest. The worker recomputes the shares
/// every few tens of milliseconds.
///
/// The shares add up to at most the limit, except that a partition is never
/// given less than 1, nor an idle one less than it has in flight.
public enum SendLimitShares {
    /// What a partition needs: its sends in flight, and whether senders wait
    /// for a place.
    public struct Demand: Sendable, Hashable {
        public var inFlight: Int
        public var waiting: Bool

        public init(inFlight: Int, waiting: Bool) {
            self.inFlight = inFlight
            self.waiting = waiting
        }
    }

    /// Each partition's limit, in the order of `demands`.
    public static func shares(of limit: Int, among demands: [Demand]) -> [Int] {
        guard !demands.isEmpty else { return [] }
        let limit = max(1, limit)
        let even = max(1, limit / demands.count)
        let busy = demands.count { $0.waiting }
        guard busy > 0 else { return Array(repeating: even, count: demands.count) }
        let reserve = max(1, even / 4)
        let kept = demands.reduce(0) { $0 + ($1.waiting ? 0 : max(reserve, $1.inFlight)) }
        let busyShare = max(1, (limit - kept) / busy)
        return demands.map { $0.waiting ? busyShare : max(reserve, $0.inFlight) }
    }
}
