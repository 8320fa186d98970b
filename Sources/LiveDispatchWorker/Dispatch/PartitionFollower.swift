import Kafka
import LiveDispatchCore
import Logging
import Synchronization

/// The dispatcher's second consumer, which joins no group: it reads the
/// co-partitions (`tokens`, `starts`) of the partitions the group assigned,
/// and the `commands` of those lingering; its offsets, committed under
/// `<group_id>.copartitions`, are where the next owner finds them and where
/// the partitions' ``HandOverMark``s are kept. It performs what the
/// ``DispatchStage`` decides; it decides nothing.
final class PartitionFollower: Sendable {
    let consumer: any ConsumerPort
    /// The group member, whose commits a partition never followed before starts from.
    private let group: any ConsumerPort
    private let configuration: WorkerConfiguration
    private let logger: Logger
    /// Taken around assignments and unassignments, so a release and a late
    /// follow of one partition never interleave.
    private let assignments = Mutex<Void>(())

    init(consumer: any ConsumerPort, group: any ConsumerPort, configuration: WorkerConfiguration, logger: Logger) {
        self.consumer = consumer
        self.group = group
        self.configuration = configuration
        self.logger = logger
    }

    /// Where the follower's offsets are committed: a group no member joins.
    static func group(_ groupID: String) -> String { groupID + ".copartitions" }

    func commands(_ number: Int32) -> TopicPartition {
        TopicPartition(topic: configuration.topic(.commands), partition: number)
    }

    /// The co-partitions of `number`.
    func copartitions(_ number: Int32) -> [TopicPartition] {
        [.tokens, .starts].map { TopicPartition(topic: configuration.topic($0), partition: number) }
    }

    /// Starts reading the co-partitions of `number` from where the group
    /// left them (paused until its restore ends), when `stillHeld` says so
    /// once their offsets are known. A partition never followed before
    /// reads from the offsets the group committed for them when it still
    /// consumed them itself, else from the beginning. Returns the offsets
    /// it reads them from (none: the beginning).
    func follow(_ number: Int32, stillHeld: () -> Bool) async throws(KafkaError) -> [TopicPartition: Int64] {
        let partitions = copartitions(number)
        var offsets = try await consumer.committedOffsets(for: partitions)
        let missing = partitions.filter { offsets[$0] == nil }
        if !missing.isEmpty {
            offsets.merge(try await group.committedOffsets(for: missing)) { followed, _ in followed }
        }
        try assignments.withLock { _ throws(KafkaError) in
            guard stillHeld() else { return }
            try consumer.assign(partitions, offsets: offsets)
            try consumer.pause(partitions)
        }
        return offsets
    }

    /// Reads a revoked partition's commands from `next` (the offset after
    /// the last one its machine took in; negative: from the group's commit).
    func linger(_ number: Int32, from next: Int64) {
        let partition = commands(number)
        do {
            var next = next
            if next < 0 { next = try group.committedOffsetsBlocking(for: [partition], timeout: .seconds(5))[partition] ?? 0 }
            try consumer.assign([partition], offsets: [partition: next])
            logger.info("Partition revoked; pushing it until its next owner claims it", metadata: ["kafka.partition": "\(number)", "kafka.offset": "\(next)"])
        } catch {
            // Its records stop here; the next owner reads them again.
            logger.warning("Reading a lingering partition's commands failed; it pushes only what it holds", metadata: [
                "kafka.partition": "\(number)", "kafka.error": "\(error)",
            ])
        }
    }

    /// Commits what released partitions finished (when `commit`) and stops
    /// reading the co-partitions of `unfollowed` and the commands of `lingered`.
    func release(_ numbers: [Int32], commit: Bool, unfollowed: [Int32], lingered: [Int32]) {
        if commit {
            do { try consumer.commitBlocking() } catch {
                logger.warning("Committing released partitions' tokens and starts failed; the next owner reads them again", metadata: [
                    "kafka.partitions": "\(numbers)", "kafka.error": "\(error)",
                ])
            }
        }
        let partitions = unfollowed.flatMap(copartitions) + lingered.map(commands)
        guard !partitions.isEmpty else { return }
        assignments.withLock { _ in
            do { try consumer.unassign(partitions) } catch {
                logger.warning("Unassigning released partitions' tokens and starts failed", metadata: ["kafka.partitions": "\(numbers)", "kafka.error": "\(error)"])
            }
        }
    }

    /// Writes the partition's ``HandOverMark``, waiting for the broker: a
    /// lingering mark is in place before the revocation returns, a released
    /// one after the release's commit.
    func write(_ mark: HandOverMark, of number: Int32) {
        do { try consumer.commitBlocking([KafkaCommitOffset(topicPartition: commands(number), offset: mark.offset)]) } catch {
            logger.warning("Writing a partition's hand-over mark failed; the other owner waits for the deadline instead", metadata: [
                "kafka.partition": "\(number)", "handover.mark": "\(mark)", "kafka.error": "\(error)",
            ])
        }
    }

    /// The marks of `numbers` as Kafka holds them now.
    func marks(of numbers: [Int32]) async throws(KafkaError) -> [Int32: HandOverMark] {
        let offsets = try await consumer.committedOffsets(for: numbers.map(commands), timeout: .seconds(2))
        return Dictionary(uniqueKeysWithValues: numbers.map { ($0, HandOverMark(offset: offsets[commands($0)])) })
    }
}
