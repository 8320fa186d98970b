import Logging

/// What the worker's stages use of a Kafka consumer: a group member
/// (``KafkaConsumer/init(configuration:topics:logger:onRevocation:)``) or a
/// consumer that assigns its partitions itself
/// (``KafkaConsumer/init(assigningManually:logger:)``). ``KafkaConsumer``
/// is the real one; a test gives the stage a fake and drives it in process.
public protocol ConsumerPort: Sendable {
    /// Assignment changes and records, in order; read from one task only.
    var events: KafkaConsumerEvents { get }
    /// Polls until graceful shutdown or ``close()``.
    func run() async throws
    /// Polls until ``close()``, ignoring graceful shutdown.
    func runUntilClosed() async throws
    /// Starts closing: final commit, leave the group, end ``events``.
    func close()
    /// Partitions currently assigned.
    var assignment: Set<TopicPartition> { get }
    func pause(_ partitions: [TopicPartition]) throws(KafkaError)
    func resume(_ partitions: [TopicPartition]) throws(KafkaError)
    /// Adds partitions to a consumer that joins no group (throws for a group member).
    func assign(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64]) throws(KafkaError)
    /// Removes partitions from a consumer that joins no group (throws for a group member).
    func unassign(_ partitions: [TopicPartition]) throws(KafkaError)
    /// Stores next-offsets, committed with the next commit.
    func storeOffsets(_ offsets: [KafkaCommitOffset]) throws(KafkaError)
    /// Commits the stored offsets, blocking the calling thread.
    func commitBlocking() throws(KafkaError)
    /// Commits the given next-offsets, blocking the calling thread.
    func commitBlocking(_ offsets: [KafkaCommitOffset]) throws(KafkaError)
    /// The group's committed next-offsets; partitions without one are left out.
    func committedOffsets(for partitions: [TopicPartition], timeout: Duration) async throws(KafkaError) -> [TopicPartition: Int64]
    /// ``committedOffsets(for:timeout:)`` blocking the calling thread.
    func committedOffsetsBlocking(for partitions: [TopicPartition], timeout: Duration) throws(KafkaError) -> [TopicPartition: Int64]
    /// The partition's end offset as the last fetch reported it; nil before one.
    func cachedEndOffset(_ partition: TopicPartition) -> Int64?
}

/// What the worker's stages use of a producer: records handed over at once,
/// in order per thread, each with a handle to its delivery.
public protocol ProducerPort: Sendable {
    func enqueue(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader]
    ) throws(KafkaError) -> KafkaPendingDelivery
}

extension ProducerPort {
    /// ``enqueue(topic:key:value:partition:headers:)`` without headers, the
    /// partition chosen by key unless given.
    public func enqueue(topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32? = nil) throws(KafkaError) -> KafkaPendingDelivery {
        try enqueue(topic: topic, key: key, value: value, partition: partition, headers: [])
    }
}

/// What the worker's stages use of a ``KafkaPartitionReader``: several
/// partitions read to their end at once (a restore).
public protocol PartitionReaderPort: Sendable {
    func read(
        _ reads: [TopicPartition: PartitionRead], timeout: Duration, _ body: (PartitionReadEvent) async throws -> Void
    ) async throws
}

/// Makes the Kafka clients a stage runs on: librdkafka's
/// (``LibrdkafkaClients``), or a test's fakes.
public protocol KafkaClientFactory: Sendable {
    /// A member of `configuration.groupID` subscribed to `topics`;
    /// `onRevocation` runs on its poll thread before revoked partitions are
    /// committed and unassigned.
    func groupConsumer(
        _ configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger,
        onRevocation: KafkaConsumer.RevocationHandler?
    ) throws(KafkaError) -> any ConsumerPort
    /// A consumer that joins no group; its offsets are committed under `configuration.groupID`.
    func assigningConsumer(_ configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) -> any ConsumerPort
    func partitionReader(_ configuration: KafkaClientConfiguration, logger: Logger) -> any PartitionReaderPort
    /// Every topic's partition count, from the cluster's metadata.
    func partitionCounts(_ configuration: KafkaClientConfiguration, logger: Logger, timeout: Duration) async throws(KafkaError) -> [String: Int]
}

/// The real clients, on librdkafka.
public struct LibrdkafkaClients: KafkaClientFactory {
    public init() {}

    public func groupConsumer(
        _ configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger,
        onRevocation: KafkaConsumer.RevocationHandler?
    ) throws(KafkaError) -> any ConsumerPort {
        try KafkaConsumer(configuration: configuration, topics: topics, logger: logger, onRevocation: onRevocation)
    }

    public func assigningConsumer(_ configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) -> any ConsumerPort {
        try KafkaConsumer(assigningManually: configuration, logger: logger)
    }

    public func partitionReader(_ configuration: KafkaClientConfiguration, logger: Logger) -> any PartitionReaderPort {
        KafkaPartitionReader(configuration: configuration, logger: logger)
    }

    public func partitionCounts(_ configuration: KafkaClientConfiguration, logger: Logger, timeout: Duration) async throws(KafkaError) -> [String: Int] {
        try await KafkaAdmin(configuration: configuration, logger: logger).partitionCounts(timeout: timeout)
    }
}

extension KafkaConsumer: ConsumerPort {}
extension KafkaProducer: ProducerPort {}
extension KafkaPartitionReader: PartitionReaderPort {}

extension KafkaConsumerEvents {
    /// Where a fake consumer puts its events: they are kept without bound,
    /// so ``yield(_:)`` never blocks.
    public struct Continuation: Sendable {
        let buffer: BoundedEventBuffer<KafkaConsumerEvent>

        public func yield(_ events: [KafkaConsumerEvent]) {
            buffer.push(events)
        }

        /// Ends the sequence once what was yielded has been read.
        public func finish() {
            buffer.finish()
        }
    }

    /// A sequence of events fed by hand, for a fake ``ConsumerPort``.
    public static func makeStream() -> (events: KafkaConsumerEvents, continuation: Continuation) {
        let buffer = BoundedEventBuffer<KafkaConsumerEvent>(capacity: 1)
        buffer.makeUnbounded()
        return (KafkaConsumerEvents(buffer: buffer), Continuation(buffer: buffer))
    }
}

/// A delivery a fake ``ProducerPort`` resolves by hand.
public struct KafkaDeliveryPromise: Sendable {
    private let delivery: RDKafkaDelivery

    public init(topic: String) {
        self.delivery = RDKafkaDelivery(topic: topic)
    }

    /// The handle ``ProducerPort/enqueue(topic:key:value:partition:headers:)`` returns.
    public var pending: KafkaPendingDelivery { KafkaPendingDelivery(delivery: delivery) }

    /// Resolves the delivery; the first result counts.
    public func resolve(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        delivery.resolve(result)
    }
}

extension ConsumerPort {
    /// ``assign(_:offsets:)`` from the committed offsets.
    public func assign(_ partitions: [TopicPartition]) throws(KafkaError) {
        try assign(partitions, offsets: [:])
    }

    /// ``committedOffsets(for:timeout:)`` within 10 seconds.
    public func committedOffsets(for partitions: [TopicPartition]) async throws(KafkaError) -> [TopicPartition: Int64] {
        try await committedOffsets(for: partitions, timeout: .seconds(10))
    }
}

extension KafkaClientFactory {
    /// Whether other members of a group over `topics` may take over the
    /// `held` partitions a member gives up: the topics have more partitions
    /// than it holds, or their counts cannot be read within 2 seconds.
    public func othersMayTakeOver(_ topics: [String], held: Int, configuration: KafkaClientConfiguration, logger: Logger) async -> Bool {
        guard held > 0 else { return false }
        guard let counts = try? await partitionCounts(configuration, logger: logger, timeout: .seconds(2)) else { return true }
        return topics.reduce(0) { $0 + (counts[$1] ?? 0) } > held
    }
}
