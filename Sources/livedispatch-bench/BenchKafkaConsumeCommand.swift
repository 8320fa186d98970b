import ArgumentParser
import Foundation
import Kafka
import LiveDispatchCore
import Logging

/// `livedispatch-bench kafka-consume`: how fast a group consumer reads a
/// topic, optionally after producing it.
struct BenchKafkaConsumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka-consume",
        abstract: "Measure how fast a group consumer reads a topic (records per second)."
    )

    @Option(help: "bootstrap.servers of the cluster.")
    var bootstrapServers: String

    @Option(help: "Topic to read.")
    var topic: String

    @Option(help: "Records to read before stopping.")
    var records: Int = 1_000_000

    @Flag(help: "Produce --records records of --value-bytes bytes to the topic first.")
    var produce = false

    @Option(help: "Value size of produced records.")
    var valueBytes: Int = 100

    @Flag(help: "Store each record's offset, as the worker does.")
    var storeOffsets = false

    @Option(name: .customLong("property"), help: "A raw librdkafka property, as name=value (repeatable).")
    var properties: [String] = []

    @Flag(help: "Log librdkafka's informational messages to standard error.")
    var verbose = false

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench.kafka-consume") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = verbose ? .info : .warning
        var client = KafkaClientConfiguration(bootstrapServers: [bootstrapServers], clientID: "livedispatch-bench")
        for property in properties {
            guard let equals = property.firstIndex(of: "=") else {
                throw ValidationError("--property takes name=value, got '\(property)'")
            }
            client.properties[String(property[..<equals])] = String(property[property.index(after: equals)...])
        }
        if produce {
            let started = ContinuousClock.now
            try await produceRecords(client: client, logger: logger)
            let seconds = (ContinuousClock.now - started).seconds
            print("produced: \(records) in \(format(seconds)) s (\(format(Double(records) / seconds)) records/s)")
        }
        let configuration = KafkaConsumerConfiguration(
            client: client, groupID: "livedispatch-bench-\(UUID().uuidString.prefix(8))",
            sessionTimeout: .seconds(6), heartbeatInterval: .milliseconds(500), autoCommitInterval: nil)
        let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: logger)
        let started = ContinuousClock.now
        var assignedAt: ContinuousClock.Instant?
        var firstRecordAt: ContinuousClock.Instant?
        var count = 0
        var bytes = 0
        // Read the options once: property wrappers are not free in a hot loop.
        let target = records
        let store = storeOffsets
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await consumer.run() }
            for await event in consumer.events {
                guard case .record(let record) = event else {
                    if case .assigned = event, assignedAt == nil { assignedAt = .now }
                    continue
                }
                if count == 0 { firstRecordAt = .now }
                count += 1
                bytes += record.value?.count ?? 0
                if store { try consumer.storeOffset(record) }
                if count >= target { break }
            }
            let finished = ContinuousClock.now
            consumer.close()
            try await group.waitForAll()
            let total = (finished - started).seconds
            let assigned = assignedAt ?? started
            let first = firstRecordAt ?? finished
            let steady = (finished - first).seconds
            print("records: \(count)")
            print("bytes: \(bytes)")
            print("time-to-assignment-seconds: \(format(assigned - started))")
            print("assignment-to-first-record-seconds: \(format(first - assigned))")
            print("first-to-last-record-seconds: \(format(steady))")
            print("records-per-second: \(format(Double(count) / steady))")
            print("records-per-second-from-assignment: \(format(Double(count) / (finished - assigned).seconds))")
            print("total-seconds: \(format(total))")
            print("records-per-second-including-join: \(format(Double(count) / total))")
        }
    }

    private func produceRecords(client: KafkaClientConfiguration, logger: Logger) async throws {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(client: client, linger: .milliseconds(20)), logger: logger)
        let value = [UInt8](repeating: UInt8(ascii: "x"), count: valueBytes)
        let window = 20_000
        var next = 0
        while next < records {
            let end = min(records, next + window)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in next..<end {
                    group.addTask {
                        try await producer.send(topic: topic, key: Array("activity-\(index)".utf8), value: value)
                    }
                }
                try await group.waitForAll()
            }
            next = end
        }
        try await producer.flush()
    }

    private func format(_ duration: Duration) -> String { format(duration.seconds) }

    private func format(_ value: Double) -> String { String(format: "%.3f", value) }
}
