import Dispatch
import Foundation
import Kafka
import Logging
import Synchronization

/// A logger for tests: warnings and errors only, so failures explain themselves.
func testLogger(_ label: String = "kafka-test") -> Logger {
    var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = ProcessInfo.processInfo.environment["KAFKA_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
    return logger
}

/// A unique name so tests sharing a cluster never collide.
func uniqueName(_ prefix: String) -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
}

/// Consumer settings that rebalance quickly against the embedded cluster.
func fastConsumerConfiguration(
    cluster: EmbeddedKafkaCluster, group: String, autoCommit: Duration? = nil, bufferCapacity: Int = 10_000
) -> KafkaConsumerConfiguration {
    var client = cluster.clientConfiguration(clientID: "kafka-tests")
    client.properties["topic.metadata.refresh.interval.ms"] = "1000"
    client.properties["reconnect.backoff.ms"] = "50"
    client.properties["reconnect.backoff.max.ms"] = "500"
    return KafkaConsumerConfiguration(
        client: client, groupID: group, sessionTimeout: .milliseconds(6000),
        heartbeatInterval: .milliseconds(300), autoCommitInterval: autoCommit, eventBufferCapacity: bufferCapacity)
}

/// Producer settings for tests against the embedded cluster.
func testProducerConfiguration(cluster: EmbeddedKafkaCluster) -> KafkaProducerConfiguration {
    var client = cluster.clientConfiguration(clientID: "kafka-tests-producer")
    client.properties["reconnect.backoff.ms"] = "50"
    client.properties["reconnect.backoff.max.ms"] = "500"
    if let debug = ProcessInfo.processInfo.environment["KAFKA_TEST_DEBUG"] { client.properties["debug"] = debug }
    return KafkaProducerConfiguration(client: client, linger: .milliseconds(1), deliveryTimeout: .seconds(60))
}

/// Runs a consumer and records every event it hands out, optionally storing
/// each record's offset as soon as it arrives.
final class ConsumerHarness: Sendable {
    let consumer: KafkaConsumer
    let name: String
    private let events = Mutex<[KafkaConsumerEvent]>([])
    private let runResult = Mutex<Result<Void, any Error>?>(nil)
    private let readerDone = Mutex(false)
    private let storeOffsets: Bool

    init(
        _ name: String, configuration: KafkaConsumerConfiguration, topics: [String], storeOffsets: Bool
    ) throws {
        self.name = name
        self.storeOffsets = storeOffsets
        consumer = try KafkaConsumer(configuration: configuration, topics: topics, logger: testLogger(name))
    }

    /// Starts the service and the reader.
    func start() {
        Task {
            do {
                try await consumer.run()
                runResult.withLock { $0 = .success(()) }
            } catch {
                runResult.withLock { $0 = .failure(error) }
            }
        }
        Task {
            for await event in consumer.events {
                if storeOffsets, case .record(let record) = event {
                    try? consumer.storeOffset(record)
                }
                events.withLock { $0.append(event) }
            }
            readerDone.withLock { $0 = true }
        }
    }

    var allEvents: [KafkaConsumerEvent] { events.withLock { $0 } }

    var records: [KafkaRecord] {
        allEvents.compactMap { event in
            if case .record(let record) = event { return record }
            return nil
        }
    }

    var assignment: Set<TopicPartition> { consumer.assignment }

    /// Closes the consumer and waits until its run and its events ended.
    func stop() async throws {
        consumer.close()
        try await waitFor("\(name) to close", timeout: .seconds(60)) {
            runResult.withLock { $0 } != nil && readerDone.withLock { $0 } ? true : nil
        }
        if case .failure(let error) = runResult.withLock({ $0 }) { throw error }
    }
}

/// Produces `count` records `key-i`/`value-i` (keys spread by murmur2) and returns their delivery reports.
@discardableResult
func produce(
    _ producer: KafkaProducer, topic: String, count: Int, prefix: String = "", partition: Int32? = nil
) async throws -> [KafkaDeliveryReport] {
    try await withThrowingTaskGroup(of: KafkaDeliveryReport.self) { group in
        for index in 0..<count {
            group.addTask {
                try await producer.send(
                    topic: topic, key: Array("\(prefix)key-\(index)".utf8), value: Array("\(prefix)value-\(index)".utf8),
                    partition: partition)
            }
        }
        var reports: [KafkaDeliveryReport] = []
        for try await report in group { reports.append(report) }
        return reports
    }
}

/// Events shared between tasks of a test.
final class EventLog: Sendable {
    private let events = Mutex<[KafkaConsumerEvent]>([])
    func append(_ event: KafkaConsumerEvent) { events.withLock { $0.append(event) } }
    var all: [KafkaConsumerEvent] { events.withLock { $0 } }
}

/// A counter shared between tasks of a test.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
