/// Tracks, per partition, which offsets have been read and which are fully
/// done, and says how far the consumer may commit: the first offset not yet
/// done (Kafka's "next offset to read"), so that a crash re-delivers every
/// record that was not finished (semantic 7).
///
/// Offsets are completed in any order; read offsets must be registered in
/// increasing order per partition (gaps are fine: compaction and transaction
/// markers leave them).
public struct OffsetTracker: Sendable {
    /// A partition of a topic.
    public struct Partition: Sendable, Hashable, Comparable, CustomStringConvertible {
        public var topic: String
        public var number: Int32

        public init(topic: String, number: Int32) {
            self.topic = topic
            self.number = number
        }

        public static func < (lhs: Partition, rhs: Partition) -> Bool {
            (lhs.topic, lhs.number) < (rhs.topic, rhs.number)
        }

        public var description: String { "\(topic)[\(number)]" }
    }

    /// The offset to commit for a partition: everything below it is done.
    public struct Commit: Sendable, Hashable {
        public var partition: Partition
        public var offset: Int64

        public init(partition: Partition, offset: Int64) {
            self.partition = partition
            self.offset = offset
        }
    }

    /// Why an input was refused; each is a bug in the caller, reported rather than trapped.
    public struct Misuse: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    struct PartitionState: Sendable, Hashable {
        /// Offsets read and not yet done, in increasing order, from `head`.
        var pending: [Int64] = []
        var head = 0
        var done: Set<Int64> = []
        /// The next offset to commit; nil until something is read.
        var committable: Int64?
        var lastRead: Int64?

        var outstanding: Int { pending.count - head }

        /// Whether `offset` was read and is not yet past the head (binary search).
        func isPending(_ offset: Int64) -> Bool {
            var low = head
            var high = pending.count
            while low < high {
                let middle = (low + high) / 2
                if pending[middle] < offset { low = middle + 1 } else { high = middle }
            }
            return low < pending.count && pending[low] == offset
        }
    }

    private var partitions: [Partition: PartitionState] = [:]

    public init() {}

    /// Records read and not yet done, over all partitions: the backlog the
    /// back-pressure watermarks are measured against.
    public private(set) var outstanding = 0

    public func outstanding(in partition: Partition) -> Int {
        partitions[partition]?.outstanding ?? 0
    }

    /// The commit position of a partition, if anything was read there.
    public func committable(_ partition: Partition) -> Int64? {
        partitions[partition]?.committable
    }

    public var assignedPartitions: [Partition] { partitions.keys.sorted() }

    /// The last offset read from a partition, if any since its assignment.
    public func lastRead(_ partition: Partition) -> Int64? {
        partitions[partition]?.lastRead
    }

    /// Starts tracking a partition (on assignment).
    public mutating func assign(_ partition: Partition) {
        if partitions[partition] == nil { partitions[partition] = PartitionState() }
    }

    /// Stops tracking a partition (on revocation); its outstanding offsets are forgotten.
    public mutating func revoke(_ partition: Partition) {
        if let state = partitions.removeValue(forKey: partition) { outstanding -= state.outstanding }
    }

    /// A record at `offset` was read and is now in progress.
    public mutating func read(_ partition: Partition, offset: Int64) throws(Misuse) {
        // Taken out of the dictionary while it changes: a copy left behind
        // would make every append and insert copy the whole backlog.
        var state = partitions.removeValue(forKey: partition) ?? PartitionState()
        defer { partitions[partition] = state }
        if let lastRead = state.lastRead, offset <= lastRead {
            throw Misuse(description: "offset \(offset) of \(partition) read after \(lastRead); reads must increase")
        }
        state.lastRead = offset
        if state.outstanding == 0 && state.committable == nil { state.committable = offset }
        state.pending.append(offset)
        outstanding += 1
    }

    /// The record at `offset` is fully done. Returns the new commit position
    /// when it moved.
    @discardableResult
    public mutating func complete(_ partition: Partition, offset: Int64) throws(Misuse) -> Commit? {
        guard var state = partitions.removeValue(forKey: partition) else {
            throw Misuse(description: "offset \(offset) completed on \(partition), which is not assigned")
        }
        defer { partitions[partition] = state }
        guard state.isPending(offset), !state.done.contains(offset) else {
            throw Misuse(description: "offset \(offset) of \(partition) completed but not in progress")
        }
        state.done.insert(offset)
        let before = state.head
        while state.head < state.pending.count, state.done.remove(state.pending[state.head]) != nil {
            state.head += 1
        }
        let advanced = state.head - before
        outstanding -= advanced
        var commit: Commit?
        if advanced > 0 {
            let next = state.head < state.pending.count ? state.pending[state.head] : (state.lastRead ?? offset) + 1
            state.committable = next
            commit = Commit(partition: partition, offset: next)
        }
        if state.head == state.pending.count {
            state.pending.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head > 4096 && state.head * 2 > state.pending.count {
            state.pending.removeFirst(state.head)
            state.head = 0
        }
        return commit
    }
}
