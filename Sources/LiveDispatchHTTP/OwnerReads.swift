import Kafka
import LiveDispatchCore
import LiveDispatchWorker
import Logging
import Synchronization

/// What this worker answers from memory as the owner of partitions
/// (``ActivityReads``), and how a read finds its partition: Murmur2 of the
/// activity id (or audience key) over the `commands` partition count, as
/// the producers choose it.
struct OwnerReads: Sendable {
    let reads: any ActivityReads
    let partitionCount: any CommandsPartitionCount

    /// The `commands` partition of `key`; nil while the count is unknown.
    func partition(of key: String) async -> Int32? {
        guard let count = await partitionCount.value, count > 0 else { return nil }
        return Murmur2Partitioner.partition(forKey: key, partitionCount: count)
    }

    /// Every `commands` partition, when this worker can read them all from memory.
    func ownsAll() async -> [Int32]? {
        guard let count = await partitionCount.value, count > 0 else { return nil }
        let all = (0..<Int32(clamping: count)).map { $0 }
        return Set(reads.readablePartitions).isSuperset(of: all) ? all : nil
    }
}

/// The number of `commands` partitions.
protocol CommandsPartitionCount: Sendable {
    var value: Int? { get async }
}

/// A partition count that is known from the start (tests, a fixed topology).
struct FixedPartitionCount: CommandsPartitionCount {
    let count: Int
    var value: Int? { count }
}

/// The `commands` partition count read once through the admin client (the
/// worker refuses to run when the co-partitioned topics' counts differ, and
/// a topic's partitions are never fewer later); asked again while unknown.
final class AdminPartitionCount: CommandsPartitionCount {
    private let client: KafkaClientConfiguration
    private let topic: String
    private let logger: Logger
    private let known = Mutex<Int?>(nil)

    init(client: KafkaClientConfiguration, topic: String, logger: Logger) {
        self.client = client
        self.topic = topic
        self.logger = logger
    }

    var value: Int? {
        get async {
            if let count = known.withLock({ $0 }) { return count }
            guard let count = try? await KafkaAdmin(configuration: client, logger: logger).partitionCount(topic: topic, timeout: .seconds(2)), count > 0 else {
                return nil
            }
            known.withLock { $0 = count }
            return count
        }
    }
}
