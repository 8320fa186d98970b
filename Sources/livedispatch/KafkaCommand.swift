import ArgumentParser
import Foundation
import Kafka
import LiveDispatchCore
import Logging
import UnixSignals

/// `livedispatch kafka …`: an embedded cluster for other programs, and a consumer of a topic.
struct KafkaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Kafka tools: an embedded cluster and a consumer of a topic.",
        subcommands: [Embedded.self, Consume.self]
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
}
