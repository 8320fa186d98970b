import ArgumentParser
import Foundation
import Kafka
import LiveDispatchCore
import Logging
import UnixSignals

/// `livedispatch kafka …`: an embedded cluster for other programs, and the consume benchmark.
struct KafkaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Kafka tools: an embedded cluster and a consume benchmark.",
        subcommands: [Embedded.self, Consume.self, BenchConsume.self]
    )

    /// A topic given as `name:partitions`.
    struct TopicArgument: ExpressibleByArgument, Sendable {
        var name: String
        var partitions: Int

        init?(argument: String) {
            guard let colon = argument.lastIndex(of: ":") else { return nil }
            let name = String(argument[..<colon])
            guard !name.isEmpty, let partitions = Int(argument[argument.index(after: colon)...]), partitions > 0
            else { return nil }
            self.name = name
            self.partitions = partitions
        }
    }

    static func logger(_ label: String, verbose: Bool) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = verbose ? .info : .warning
        return logger
    }

    struct Embedded: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run an in-process Kafka cluster (librdkafka's mock cluster) until SIGTERM or SIGINT.",
            discussion: """
                Prints one line `bootstrap: <servers>` on standard output once the cluster and its topics exist. \
                With --control it reads faults to inject from standard input, one per line, answering each with \
                `ok` or `error: <why>`: `broker-down ID`, `broker-up ID`, `errors API CODE COUNT` (the next COUNT \
                requests of API fail with Kafka error CODE; API is produce, fetch, offset-commit, offset-fetch, \
                metadata, list-offsets, find-coordinator, join-group, heartbeat or sync-group) and \
                `clear-errors API`. The end of standard input then stops the cluster, as SIGTERM does.
                """
        )

        @Option(help: "Number of brokers.")
        var brokers: Int = 3

        @Option(name: .customLong("topic"), help: "A topic to create, as name:partitions (repeatable).")
        var topics: [TopicArgument] = []

        @Flag(help: "Log librdkafka's informational messages to standard error.")
        var verbose = false

        @Flag(help: "Read fault injections from standard input (see above); its end stops the cluster.")
        var control = false

        func validate() throws {
            guard brokers >= 1 else { throw ValidationError("--brokers must be at least 1") }
        }

        func run() async throws {
            let logger = KafkaCommand.logger("livedispatch.kafka.embedded", verbose: verbose)
            let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: logger)
            for topic in topics {
                try cluster.createTopic(topic.name, partitions: topic.partitions, replicationFactor: min(brokers, 3))
            }
            FileHandle.standardOutput.write(Data("bootstrap: \(cluster.bootstrapServers)\n".utf8))
            let inputEnded = AsyncStream<Void>.makeStream()
            if control {
                // readLine blocks: a thread of its own, not the cooperative pool.
                Thread.detachNewThread {
                    Self.serveControl(cluster: cluster)
                    inputEnded.continuation.yield()
                }
            }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await signal in signals {
                        logger.info("Embedded Kafka cluster stopping", metadata: ["signal": "\(signal)"])
                        break
                    }
                }
                group.addTask {
                    for await _ in inputEnded.stream { break }
                }
                _ = await group.next()
                group.cancelAll()
            }
            withExtendedLifetime(cluster) {}
        }

        /// Applies each control line of standard input until its end.
        private static func serveControl(cluster: EmbeddedKafkaCluster) {
            while let line = readLine(strippingNewline: true) {
                let answer: String
                do {
                    try EmbeddedKafkaControl(parsing: String(line.prefix(1_000))).apply(to: cluster)
                    answer = "ok"
                } catch {
                    answer = "error: \(error)"
                }
                FileHandle.standardOutput.write(Data((answer + "\n").utf8))
            }
        }
    }

    struct Consume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Consume topics in a group and print one line per record until SIGTERM or SIGINT.",
            discussion: """
                Lines are `assigned <topic>[<partition>] …`, `revoked …` and
                `record <topic> <partition> <offset> <key> <value>` (keys and values as UTF-8,
                `null` when absent). With --commit, each printed record's offset is stored and committed.
                """
        )

        @Option(help: "bootstrap.servers of the cluster.")
        var bootstrapServers: String

        @Option(help: "Consumer group id.")
        var group: String

        @Option(name: .customLong("topic"), help: "A topic to consume (repeatable).")
        var topics: [String]

        @Flag(help: "Store and commit the offsets of printed records.")
        var commit = false

        @Option(help: "session.timeout.ms of the group member.")
        var sessionTimeoutMs: Int = 45_000

        func run() async throws {
            let logger = KafkaCommand.logger("livedispatch.kafka.consume", verbose: false)
            let configuration = KafkaConsumerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: [bootstrapServers], clientID: "livedispatch-consume"),
                groupID: group, sessionTimeout: .milliseconds(Int64(sessionTimeoutMs)),
                heartbeatInterval: .milliseconds(Int64(max(100, sessionTimeoutMs / 10))),
                autoCommitInterval: commit ? .seconds(1) : nil)
            let consumer = try KafkaConsumer(configuration: configuration, topics: topics, logger: logger)
            let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            let store = commit
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                group.addTask {
                    for await _ in signals {
                        consumer.close()
                        break
                    }
                }
                for await event in consumer.events {
                    let line: String
                    switch event {
                    case .assigned(let partitions):
                        line = "assigned " + partitions.map(\.description).joined(separator: " ")
                    case .revoked(let partitions, let lost):
                        line = "revoked " + partitions.map(\.description).joined(separator: " ") + (lost ? " lost" : "")
                    case .record(let record):
                        let key = record.key.map { String(decoding: $0, as: UTF8.self) } ?? "null"
                        let value = record.value.map { String(decoding: $0, as: UTF8.self) } ?? "null"
                        line = "record \(record.topic) \(record.partition) \(record.offset) \(key) \(value)"
                        if store { try consumer.storeOffset(record) }
                    }
                    FileHandle.standardOutput.write(Data((line + "\n").utf8))
                }
                group.cancelAll()
            }
        }
    }

    struct BenchConsume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bench-consume",
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
            let logger = KafkaCommand.logger("livedispatch.kafka.bench", verbose: verbose)
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
}
