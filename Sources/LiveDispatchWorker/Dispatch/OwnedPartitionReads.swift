import LiveDispatchCore

/// Reads answered by the owner of a `commands` partition, from the memory
/// of its machine: each answer is `nil` when this worker does not own the
/// partition or has not restored it yet (the caller then asks the owner, or
/// Kafka). A read holds one partition's lock while it copies its page.
public protocol ActivityReads: Sendable {
    /// The partitions owned here and restored.
    var readablePartitions: [Int32] { get }
    /// The activity in `partition` (its `commands` partition) with a page
    /// of its tokens: `.some(nil)` when the owner holds nothing of it.
    func activity(_ activity: ActivityID, partition: Int32, tokensAfter cursor: String?, limit: Int) -> PartitionDispatcher.ActivityRead??
    /// A page of the audience's push-to-start tokens (the audience key is the partition's key).
    func audience(_ audience: AudienceKey, partition: Int32, after cursor: String?, limit: Int)
        -> PartitionDispatcher.TokenPage<PartitionDispatcher.AudienceToken>?
    /// The first `limit` activities by id whose id contains `text`, over the
    /// readable `partitions` asked for, and how many matched in all.
    func activities(containing text: String?, limit: Int, in partitions: [Int32]) -> ActivityListing
}

/// A list of activities from their owners' memory.
public struct ActivityListing: Sendable {
    public var matched: Int
    public var entries: [PartitionDispatcher.ActivityListEntry]
    /// The asked partitions that were readable here.
    public var partitions: [Int32]

    public init(matched: Int, entries: [PartitionDispatcher.ActivityListEntry], partitions: [Int32]) {
        self.matched = matched
        self.entries = entries
        self.partitions = partitions
    }
}

/// ``ActivityReads`` over a dispatcher's partition runners: what the HTTP
/// API asks of the partitions this worker owns. It decides nothing and
/// holds nothing; each read takes the dispatcher's status and one runner's
/// lock while it copies a page.
public struct OwnedPartitionReads: ActivityReads {
    let dispatcher: Dispatcher

    public init(_ dispatcher: Dispatcher) {
        self.dispatcher = dispatcher
    }

    public var readablePartitions: [Int32] {
        dispatcher.status.owned.filter { dispatcher.runner($0).map { !$0.isRestoring } ?? false }
    }

    /// The runner of `partition` when it is owned here.
    private func ownedRunner(_ partition: Int32) -> PartitionRunner? {
        guard dispatcher.status.owned.contains(partition) else { return nil }
        return dispatcher.runner(partition)
    }

    public func activity(_ activity: ActivityID, partition: Int32, tokensAfter cursor: String?, limit: Int) -> PartitionDispatcher.ActivityRead?? {
        guard let runner = ownedRunner(partition) else { return nil }
        let answer: PartitionDispatcher.ActivityRead?? = runner.read { machine in machine.read(activity: activity, tokensAfter: cursor, limit: limit) }
        return answer
    }

    public func audience(_ audience: AudienceKey, partition: Int32, after cursor: String?, limit: Int)
        -> PartitionDispatcher.TokenPage<PartitionDispatcher.AudienceToken>?
    {
        ownedRunner(partition)?.read { $0.audiencePage(of: audience, after: cursor, limit: limit) }
    }

    public func activities(containing text: String?, limit: Int, in partitions: [Int32]) -> ActivityListing {
        // Ids are matched under each partition's lock, sorted outside it,
        // and only the listed ones read back.
        let owned = Set(dispatcher.status.owned)
        var read: [Int32] = []
        var matches: [(id: ActivityID, partition: Int32)] = []
        for partition in partitions where owned.contains(partition) {
            guard let ids = dispatcher.runner(partition)?.read({ $0.activityIDs(containing: text) }) else { continue }
            read.append(partition)
            matches += ids.map { ($0, partition) }
        }
        let first = matches.count <= limit ? matches.sorted { $0.id < $1.id } : Self.smallest(matches, limit)
        var entries: [PartitionDispatcher.ActivityListEntry] = []
        for (partition, group) in Dictionary(grouping: first, by: \.partition) {
            entries += dispatcher.runner(partition)?.read { machine in group.compactMap { machine.listEntry($0.id) } } ?? []
        }
        entries.sort { $0.state.activityID < $1.state.activityID }
        return ActivityListing(matched: matches.count, entries: entries, partitions: read.sorted())
    }

    /// The `limit` smallest ids, sorted, without sorting them all.
    private static func smallest(_ matches: [(id: ActivityID, partition: Int32)], _ limit: Int) -> [(id: ActivityID, partition: Int32)] {
        guard limit > 0 else { return [] }
        var kept = matches.prefix(limit).sorted { $0.id < $1.id }
        for match in matches.dropFirst(limit) where match.id < kept[kept.count - 1].id {
            let at = kept.firstIndex { match.id < $0.id } ?? kept.count
            kept.insert(match, at: at)
            kept.removeLast()
        }
        return kept
    }
}
