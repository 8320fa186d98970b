/// How a capped read spreads over partitions: each partition's share of the
/// limit, so that every partition with records contributes and none is
/// read past its share while another is short of its own.
public enum RecordSample {
    /// Each partition's share of `limit` records, given how many it holds
    /// (`counts`): the limit is divided evenly, and what a partition holding
    /// fewer does not use goes to the others (water-filling). The shares
    /// add up to the smaller of `limit` and the total held; when they all
    /// fit, every partition gives everything it holds.
    public static func shares(counts: [TopicPartition: Int64], limit: Int64) -> [TopicPartition: Int64] {
        // Smallest first, so what they leave is known before the larger take theirs.
        let ordered = counts.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
        var remaining = max(0, limit)
        var shares: [TopicPartition: Int64] = [:]
        for (index, (partition, count)) in ordered.enumerated() {
            let left = Int64(ordered.count - index)
            // Rounded up, so a limit below the partition count still reads the smallest.
            let even = remaining / left + (remaining % left == 0 ? 0 : 1)
            let share = min(max(0, count), even)
            shares[partition] = share
            remaining -= share
        }
        return shares
    }
}
