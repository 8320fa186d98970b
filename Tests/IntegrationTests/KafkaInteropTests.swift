import Foundation
import Kafka
import Logging
import Synchronization
import Testing

/// The embedded cluster started as its own process, with `kcat` (librdkafka's
/// command-line client) on the other side of the Swift producer and consumer.
@Suite("Kafka interop with kcat through `livedispatch kafka embedded`")
struct KafkaInteropTests {
    static let kcat = URL(fileURLWithPath: "/usr/bin/kcat")

    static func logger() -> Logger {
        var logger = Logger(label: "kafka-interop") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .error
        return logger
    }

    @Test func kcatAndTheSwiftClientsReadEachOthersRecords() async throws {
        let cluster = try BackgroundProcess([
            "kafka", "embedded", "--brokers", "2", "--topic", "interop.in:2", "--topic", "interop.out:1",
        ])
        let line = try await cluster.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("bootstrap: ") }
        let bootstrap = String(line.dropFirst("bootstrap: ".count))
        #expect(!bootstrap.isEmpty)

        // kcat produces keyed records with a header; the Swift consumer reads them.
        let input = (0..<20).map { "key-\($0):value-\($0)" }.joined(separator: "\n") + "\n"
        let produced = try runProcess(
            ["-P", "-b", bootstrap, "-t", "interop.in", "-K", ":", "-H", "origin=kcat"], executable: Self.kcat,
            standardInput: input)
        #expect(produced.status == 0, "\(produced.standardError)")

        let client = KafkaClientConfiguration(bootstrapServers: [bootstrap], clientID: "interop")
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                client: client, groupID: "interop", sessionTimeout: .seconds(6), heartbeatInterval: .milliseconds(300),
                autoCommitInterval: nil),
            topics: ["interop.in"], logger: Self.logger())
        let received = Mutex<[KafkaRecord]>([])
        let service = Task { try await consumer.run() }
        let reader = Task {
            for await event in consumer.events {
                if case .record(let record) = event { received.withLock { $0.append(record) } }
            }
        }
        _ = try await waitFor("the records kcat produced", timeout: .seconds(60)) {
            received.withLock { $0.count } >= 20 ? true : nil
        }
        let records = received.withLock { $0 }
        #expect(records.count == 20)
        let pairs = Set(records.map { record in
            "\(String(decoding: record.key ?? [], as: UTF8.self))=\(String(decoding: record.value ?? [], as: UTF8.self))"
        })
        #expect(pairs == Set((0..<20).map { "key-\($0)=value-\($0)" }))
        #expect(records.allSatisfy { $0.headers == [KafkaHeader(key: "origin", value: Array("kcat".utf8))] })
        // kcat places keys with librdkafka's default partitioner; what matters
        // here is that each key stayed in one partition.
        consumer.close()
        try await service.value
        await reader.value

        // The Swift producer writes; kcat reads, including a null key and a tombstone.
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: Self.logger())
        for index in 0..<5 {
            try await producer.send(
                topic: "interop.out", key: Array("activity-\(index)".utf8), value: Array("state-\(index)".utf8),
                headers: [KafkaHeader(key: "origin", value: Array("swift".utf8))])
        }
        try await producer.send(topic: "interop.out", key: nil, value: Array("no-key".utf8))
        try await producer.send(topic: "interop.out", key: Array("activity-0".utf8), value: nil)
        let consumed = try runProcess(
            ["-C", "-b", bootstrap, "-t", "interop.out", "-o", "beginning", "-e", "-q", "-Z", "-f", "%k=%s|%h\\n"],
            executable: Self.kcat)
        #expect(consumed.status == 0, "\(consumed.standardError)")
        let lines = consumed.standardOutput.split(separator: "\n").map(String.init)
        #expect(
            lines
                == (0..<5).map { "activity-\($0)=state-\($0)|origin=swift" } + ["NULL=no-key|", "activity-0=NULL|"])

        let status = try await cluster.stop()
        #expect(status == 0)
    }
}

/// A group member killed with SIGKILL, as a crashed worker would be.
@Suite("Kafka at-least-once across a crashed consumer process")
struct KafkaCrashTests {
    @Test func recordsOfAKilledMemberAreDeliveredToTheSurvivor() async throws {
        let cluster = try BackgroundProcess(["kafka", "embedded", "--brokers", "1", "--topic", "crash:2"])
        let line = try await cluster.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("bootstrap: ") }
        let bootstrap = String(line.dropFirst("bootstrap: ".count))
        let client = KafkaClientConfiguration(bootstrapServers: [bootstrap], clientID: "crash")
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: KafkaInteropTests.logger())
        var expected: Set<String> = []
        for index in 0..<40 {
            let report = try await producer.send(topic: "crash", key: Array("k-\(index)".utf8), value: Array("v-\(index)".utf8))
            expected.insert("\(report.partition)/\(report.offset)")
        }

        // The doomed member reads everything, commits nothing, and is killed.
        let doomed = try BackgroundProcess([
            "kafka", "consume", "--bootstrap-servers", bootstrap, "--group", "crash-group", "--topic", "crash",
            "--session-timeout-ms", "6000",
        ])
        _ = try await waitFor("the doomed member to read every record", timeout: .seconds(60)) {
            doomed.standardOutputLines.filter { $0.hasPrefix("record ") }.count >= 40 ? true : nil
        }
        let status = try await doomed.stop(signal: SIGKILL)
        #expect(status == SIGKILL)

        // The survivor joins the same group: once the dead member's session
        // expires, it gets both partitions from the start again.
        let survivor = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                client: client, groupID: "crash-group", sessionTimeout: .seconds(6),
                heartbeatInterval: .milliseconds(300), autoCommitInterval: nil),
            topics: ["crash"], logger: KafkaInteropTests.logger())
        let seen = Mutex<Set<String>>([])
        let service = Task { try await survivor.run() }
        let reader = Task {
            for await event in survivor.events {
                if case .record(let record) = event {
                    _ = seen.withLock { $0.insert("\(record.partition)/\(record.offset)") }
                }
            }
        }
        _ = try await waitFor("the survivor to get the records again", timeout: .seconds(90)) {
            seen.withLock { $0 }.isSuperset(of: expected) ? true : nil
        }
        survivor.close()
        try await service.value
        await reader.value
        #expect(try await cluster.stop() == 0)
    }
}
