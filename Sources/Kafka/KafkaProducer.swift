import Logging
import ServiceLifecycle

/// Produces records and tells each sender where its record landed (or why it
/// did not), from librdkafka's delivery reports. Keyed records without an
/// explicit partition go where the Java client would put them (murmur2).
///
/// Run it as a ServiceLifecycle `Service` so that graceful shutdown flushes
/// what is still queued; ``send(topic:key:value:partition:headers:)`` works
/// whether or not ``run()`` was called.
public final class KafkaProducer: Service, Sendable {
    private let client: RDKafkaProducerClient
    private let logger: Logger
    private let flushTimeout: Duration

    /// Creates the producer. `flushTimeout` bounds the flush on shutdown.
    public init(
        configuration: KafkaProducerConfiguration, logger: Logger, flushTimeout: Duration = .seconds(30)
    ) throws(KafkaError) {
        self.client = try RDKafkaProducerClient(
            properties: configuration.librdkafkaProperties,
            topicProperties: configuration.topicCompression.mapValues { ["compression.type": $0.rawValue] }, logger: logger)
        self.logger = logger
        self.flushTimeout = flushTimeout
    }

    /// Sends one record and waits for its delivery report. A nil `key` sends
    /// a record without a key, a nil `value` a tombstone; a nil `partition`
    /// lets the murmur2 partitioner choose by key. Waits for room when
    /// librdkafka's queue is full.
    @discardableResult
    public func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32? = nil, headers: [KafkaHeader] = []
    ) async throws(KafkaError) -> KafkaDeliveryReport {
        try await client.send(topic: topic, key: key, value: value, partition: partition, headers: headers)
    }

    /// Hands one record to librdkafka now and returns a handle to await its
    /// delivery. Records enqueued one after another from one thread keep
    /// their order in a partition (the producer is idempotent when so
    /// configured, so retries cannot reorder them); ``send(topic:key:value:partition:headers:)``
    /// called from concurrent tasks gives no such order. Throws at once when
    /// librdkafka refuses the record, e.g. with a full queue.
    public func enqueue(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32? = nil, headers: [KafkaHeader] = []
    ) throws(KafkaError) -> KafkaPendingDelivery {
        KafkaPendingDelivery(delivery: try client.enqueueNow(topic: topic, key: key, value: value, partition: partition, headers: headers))
    }

    /// Waits until every record queued so far was delivered or failed, at most `timeout`.
    public func flush(timeout: Duration = .seconds(30)) async throws(KafkaError) {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.milliseconds)
        let error = await DedicatedThread.run(name: "kafka-flush") { client.flush(timeoutMilliseconds: milliseconds) }
        if let error { throw error }
    }

    /// Looks up where `topics` live now, so the first record to each does
    /// not wait for that lookup (about a second on some clusters).
    public func prepare(topics: [String], timeout: Duration = .seconds(10)) async throws(KafkaError) {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.milliseconds)
        let error = await DedicatedThread.run(name: "kafka-metadata") { client.prepare(topics: topics, timeoutMilliseconds: milliseconds) }
        if let error { throw error }
    }

    /// Records queued or in flight.
    public var outstandingRecords: Int { client.outstandingRecords }

    /// Waits for graceful shutdown (or cancellation), then flushes.
    public func run() async throws {
        // Cancellation ends the wait as shutdown does: either way, flush.
        try? await gracefulShutdown()
        logger.info("Kafka producer flushing", metadata: ["kafka.outstanding": "\(outstandingRecords)"])
        try await flush(timeout: flushTimeout)
    }
}

/// A record handed to librdkafka whose delivery report has not been read yet.
public struct KafkaPendingDelivery: Sendable {
    let delivery: RDKafkaDelivery

    /// Where the record landed, or why librdkafka gave up on it.
    public func wait() async throws(KafkaError) -> KafkaDeliveryReport {
        try await delivery.wait().get()
    }

    /// Calls `body` once Kafka acknowledged or refused the record, on
    /// librdkafka's delivery thread (at once when already known): for owners
    /// that take many acknowledgements without a task per record.
    public func whenComplete(_ body: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void) {
        delivery.whenResolved(body)
    }
}
