import Foundation
import Kafka
import LiveDispatchCore
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A complete LiveDispatch installation made of real processes: an embedded
/// Kafka cluster (`livedispatch kafka embedded`), an APNs simulator
/// (`livedispatch simulate apns` over TLS) and any number of workers
/// (`livedispatch run`), plus a producer and readers for the test itself.
final class WorkerStack: Sendable {
    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"
    static let bundleID = "com.example.livedispatch"

    let directory: URL
    let kafka: BackgroundProcess
    let bootstrap: String
    let simulator: BackgroundProcess
    let apnsPort: Int
    let partitions: Int
    let producer: KafkaProducer
    let logger: Logger

    var recordFile: URL { directory.appendingPathComponent("pushes.jsonl") }

    /// Starts Kafka with the co-partitioned topics (`tokensPartitions` lets a
    /// test break co-partitioning) and the simulator with `simulatorFlags`.
    init(partitions: Int = 4, tokensPartitions: Int? = nil, simulatorFlags: [String] = []) async throws {
        directory = try TestPaths.temporaryDirectory("livedispatch-e2e")
        self.partitions = partitions
        var logger = Logger(label: "e2e")
        // The stack's own clients: only errors (the cluster process going away at the end is expected).
        logger.logLevel = .error
        self.logger = logger
        let topics = ["livedispatch.commands:\(partitions)", "livedispatch.tokens:\(tokensPartitions ?? partitions)",
                      "livedispatch.state:\(partitions)", "livedispatch.token-store:\(partitions)",
                      "livedispatch.dead-letters:\(partitions)", "livedispatch.starts:\(partitions)", "livedispatch.channels:\(partitions)", "livedispatch.outcomes:\(partitions)", "sports.scores:\(partitions)", "delivery.orders:\(partitions)"]
        kafka = try BackgroundProcess(["kafka", "embedded", "--brokers", "1"] + topics.flatMap { ["--topic", $0] })
        let bootstrapLine = try await kafka.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("bootstrap: ") }
        bootstrap = String(bootstrapLine.dropFirst("bootstrap: ".count))

        let key = directory.appendingPathComponent("key.p8").path
        let generated = try runProcess(["simulate", "apns", "--generate-key", key])
        guard generated.status == 0 else { throw WaitTimeout(what: "a generated key: \(generated.standardError)") }
        simulator = try BackgroundProcess([
            "simulate", "apns", "--port", "0", "--team-id", Self.teamID, "--key-id", Self.keyID, "--key", key,
            "--bundle-id", Self.bundleID, "--cert-out", directory.appendingPathComponent("sim.pem").path,
            "--record", directory.appendingPathComponent("pushes.jsonl").path, "--threads", "1",
        ] + simulatorFlags)
        let listening = try await simulator.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("listening: ") }
        apnsPort = Int(listening.split(separator: ":").last ?? "") ?? 0

        producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), linger: .milliseconds(1)),
            logger: logger)
    }

    /// Writes a worker configuration; `extra` is YAML appended as is (sections not otherwise written).
    func writeConfiguration(
        group: String = "e2e", window: String = "250ms", maxDelay: String = "1s", adminPort: Int? = nil, probePort: Int? = nil,
        maxInFlight: Int = 256, rules: String? = nil, reloadInterval: String = "0", extra: String = ""
    ) throws -> String {
        try writeWorkerConfiguration(
            in: directory, bootstrap: bootstrap, group: group, partitions: partitions, createTopics: false,
            properties: ["log_level": "3"], rules: rules, reloadInterval: reloadInterval, sections: """
                apns:
                  endpoint: 127.0.0.1:\(apnsPort)
                  bundle_id: \(Self.bundleID)
                  team_id: \(Self.teamID)
                  key_id: \(Self.keyID)
                  key_path: \(directory.appendingPathComponent("key.p8").path)
                  trust_roots: [\(directory.appendingPathComponent("sim.pem").path)]
                  connections: 2
                coalesce:
                  window: \(window)
                  max_delay: \(maxDelay)
                limits:
                  max_in_flight_per_activity: \(maxInFlight)
                admin:
                  listen: "\(adminPort.map { "127.0.0.1:\($0)" } ?? "")"
                  probe_listen: "\(probePort.map { "127.0.0.1:\($0)" } ?? "")"
                \(extra)
                """)
    }

    /// Starts a worker and waits until it has restored `partitions` partitions.
    func startWorker(configuration: String, restoring partitions: Int? = nil) async throws -> BackgroundProcess {
        let worker = try BackgroundProcess(["run", "--config", configuration], environment: ["LIVEDISPATCH_LOG_LEVEL": ProcessInfo.processInfo.environment["E2E_WORKER_LOG_LEVEL"] ?? "info"])
        let expected = partitions ?? self.partitions
        try await waitFor("the worker to restore \(expected) partitions", timeout: .seconds(90)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            return worker.standardErrorLines.filter { $0.contains("Partition restored") }.count >= expected ? true : nil
        }
        return worker
    }

    func produce(_ topic: String, key: String?, _ json: String) async throws {
        try await producer.send(topic: topic, key: key.map { Array($0.utf8) }, value: Array(json.utf8))
    }

    /// Enqueues many records in order, then waits for all of them.
    func produceInOrder(_ topic: String, _ records: [(key: String?, json: String)]) async throws {
        var pending: [KafkaPendingDelivery] = []
        for record in records {
            pending.append(try producer.enqueue(topic: topic, key: record.key.map { Array($0.utf8) }, value: Array(record.json.utf8)))
        }
        for delivery in pending { _ = try await delivery.wait() }
    }

    func register(_ token: String, for activity: String, environment: String = "production") async throws {
        try await produce("livedispatch.tokens", key: activity, #"{"activity_id": "\#(activity)", "token": "\#(token)", "environment": "\#(environment)"}"#)
    }

    /// Waits for `condition`; on a timeout the error also tells what the
    /// workers logged at warning level or above and what each token got.
    func waitWithDiagnostics<T>(
        _ what: String, workers: [BackgroundProcess], timeout: Duration = .seconds(60), condition: () async throws -> T?
    ) async throws -> T {
        do {
            return try await waitFor(what, timeout: timeout, condition: condition)
        } catch let error as WaitTimeout {
            let logs = workers.flatMap { worker in
                worker.standardErrorLines.filter { $0.contains(" warning ") || $0.contains(" error ") || $0.contains(" critical ") }.suffix(20)
            }
            let byToken = pushesByToken()
            let received = byToken.map { "\($0.key.prefix(8))…\($0.key.suffix(4)): \($0.value.map { $0.contentState["teamOneScore"]?.description ?? $0.event })" }.sorted().prefix(30)
            let restored = workers.flatMap { $0.standardErrorLines.filter { $0.contains("Partition restored") || $0.contains("revoked") || $0.contains("assigned") }.suffix(12) }
            throw WaitTimeout(what: "\(error.what); worker warnings: \(logs); assignments: \(restored); tokens with pushes: \(byToken.count); pushes by token: \(received)")
        }
    }

    /// Every push the simulator accepted so far, in arrival order.
    func pushes() -> [RecordedLine] {
        recordedPushes(recordFile)
    }

    /// The pushes each token received, in arrival order.
    func pushesByToken() -> [String: [RecordedLine]] {
        Dictionary(grouping: pushes(), by: \.token)
    }

    /// Records of an internal topic, all partitions, read to the end.
    func read(_ topic: String) async throws -> [KafkaRecord] {
        let reader = KafkaPartitionReader(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), logger: logger)
        var records: [KafkaRecord] = []
        for partition in 0..<Int32(partitions) {
            records += try await reader.readAll(topic: topic, partition: partition)
        }
        return records
    }

    func deadLetters() async throws -> [DeadLetter] {
        try await read("livedispatch.dead-letters").compactMap { record in
            guard let value = record.value else { return nil }
            return try? DeadLetter(json: JSONValue.parse(value))
        }
    }

    /// The worker's Prometheus metrics, read with curl.
    func metrics(port: Int) throws -> String {
        try runProcess(["-s", "http://127.0.0.1:\(port)/metrics"], executable: URL(fileURLWithPath: "/usr/bin/curl")).standardOutput
    }

    /// The sum of a counter's samples whose labels contain `labels`.
    static func counter(_ name: String, labels: String, in text: String) -> Double {
        text.split(separator: "\n").filter { ($0.hasPrefix(name + "{") || $0.hasPrefix(name + " ")) && (labels.isEmpty || $0.contains(labels)) }
            .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
    }
}

/// Writes a test worker's configuration file into `directory` and returns its
/// path: Kafka at `bootstrap` with quick group liveness (a stopped worker's
/// partitions move within seconds) and a 10 ms fetch wait (the test brokers,
/// librdkafka's mock cluster and Tansu, hold an empty fetch for its whole
/// wait rather than answer when a record arrives), the shipped rules never
/// reloaded, a 10 s shutdown bound, then `sections` (YAML) as they are.
func writeWorkerConfiguration(
    in directory: URL, bootstrap: String, group: String, partitions: Int, createTopics: Bool,
    properties: [String: String] = [:], rules: String? = nil, reloadInterval: String = "0", sections: String
) throws -> String {
    let path = directory.appendingPathComponent("worker-\(UUID().uuidString.prefix(6)).yaml").path
    let extraProperties = properties.sorted { $0.key < $1.key }.map { "    \($0.key): \"\($0.value)\"" }.joined(separator: "\n")
    let yaml = """
        kafka:
          bootstrap: \(bootstrap)
          group_id: \(group)
          create_topics: \(createTopics)
          partitions: \(partitions)
          properties:
            session.timeout.ms: "6000"
            heartbeat.interval.ms: "300"
            fetch.wait.max.ms: "10"
        \(extraProperties)
        rules:
          path: \(rules ?? TestPaths.repositoryRoot.appendingPathComponent("Config/rules").path)
          reload_interval: \(reloadInterval)
        shutdown:
          timeout: 10s
        \(sections)
        """
    try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

/// One line of the simulator's record file.
struct RecordedLine: Sendable {
    var value: JSONValue
    var token: String { value["token"]?.stringValue ?? "" }
    var headers: [String: String] {
        (value["headers"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
    }
    var aps: JSONValue { value["payload"]?["aps"] ?? .null }
    var contentState: JSONValue { aps["content-state"] ?? .null }
    var event: String { aps["event"]?.stringValue ?? "" }
}

