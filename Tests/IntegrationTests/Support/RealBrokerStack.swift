import Foundation
import LiveDispatchCore

/// A Tansu broker (`scripts/real-broker run`: a Kafka-compatible broker
/// written independently of librdkafka) and `livedispatch run` workers
/// against it, each with its in-process APNs simulator recording what it
/// accepted. Every client runs with the newer librdkafka that
/// `scripts/bootstrap` installs (`scripts/real-broker library-path`):
/// Debian 12's 2.0.2 cannot read Tansu's ApiVersions answer.
final class RealBrokerStack: Sendable {
    static let script = TestPaths.repositoryRoot.appendingPathComponent("scripts/real-broker")

    let directory: URL
    let broker: BackgroundProcess
    let bootstrap: String
    let partitions: Int
    /// The directory holding `librdkafka.so.1` >= 2.1.1, for `LD_LIBRARY_PATH`.
    let libraryPath: String

    /// Starts a broker and creates the domain topics the shipped rules read;
    /// the workers create the internal topics (`kafka.create_topics: true`).
    /// `port`: the broker's port (default: a free one).
    init(partitions: Int = 4, port: Int? = nil) async throws {
        directory = try TestPaths.temporaryDirectory("livedispatch-tansu")
        self.partitions = partitions
        let path = try runProcess(["library-path"], executable: Self.script)
        guard path.status == 0 else { throw WaitTimeout(what: "the newer librdkafka (run scripts/bootstrap): \(path.standardError)") }
        libraryPath = path.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        broker = try BackgroundProcess(["run"] + (port.map { ["--port", String($0)] } ?? []), executable: Self.script)
        let line = try await broker.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("bootstrap: ") }
        bootstrap = String(line.dropFirst("bootstrap: ".count))
        _ = try await broker.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("ready in") }
        for topic in ["sports.scores", "delivery.orders"] {
            let created = try runProcess(["topic", bootstrap, topic, String(partitions)], executable: Self.script)
            guard created.status == 0 else { throw WaitTimeout(what: "topic \(topic) on Tansu: \(created.standardError)") }
        }
    }

    /// The environment every `livedispatch` and `kcat` process of this stack runs with.
    var environment: [String: String] {
        ["LD_LIBRARY_PATH": libraryPath, "LIVEDISPATCH_LOG_LEVEL": ProcessInfo.processInfo.environment["E2E_WORKER_LOG_LEVEL"] ?? "info"]
    }

    /// Writes a worker configuration for this broker with the in-process APNs simulator.
    /// `rules`: a rules directory other than `Config/rules`.
    func writeConfiguration(group: String = "tansu", adminPort: Int? = nil, rules: String? = nil) throws -> String {
        try writeWorkerConfiguration(
            in: directory, bootstrap: bootstrap, group: group, partitions: partitions, createTopics: true, rules: rules, sections: """
                apns:
                  endpoint: simulator
                coalesce:
                  window: 100ms
                  max_delay: 500ms
                admin:
                  listen: "\(adminPort.map { "127.0.0.1:\($0)" } ?? "")"
                """)
    }

    /// A worker started with `arguments` after `run --config`; its simulator
    /// records to `record`.
    func worker(configuration: String, record: URL, arguments: [String] = []) throws -> BackgroundProcess {
        try BackgroundProcess(
            ["run", "--config", configuration, "--simulator-record", record.path] + arguments, environment: environment)
    }

    /// Starts a worker and waits until it has restored `partitions` partitions.
    func startWorker(configuration: String, record: URL, restoring partitions: Int) async throws -> BackgroundProcess {
        let worker = try worker(configuration: configuration, record: record)
        try await waitFor("the worker to restore \(partitions) partitions", timeout: .seconds(60)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            return worker.standardErrorLines.filter { $0.contains("Partition restored") }.count >= partitions ? true : nil
        }
        return worker
    }

    /// Publishes `records` in order with kcat, placed by the Java client's
    /// murmur2 partitioner as the workers place theirs.
    func produce(_ topic: String, _ records: [(key: String, json: String)]) throws {
        let input = records.map { "\($0.key)\t\($0.json)" }.joined(separator: "\n") + "\n"
        let result = try runProcess(
            ["-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "partitioner=murmur2_random"],
            executable: URL(fileURLWithPath: "/usr/bin/kcat"), standardInput: input, environment: environment)
        guard result.status == 0 else { throw WaitTimeout(what: "kcat to publish to \(topic): \(result.standardError)") }
    }

    func register(_ token: String, for activity: String) throws {
        try produce("livedispatch.tokens", [(activity, #"{"activity_id": "\#(activity)", "token": "\#(token)"}"#)])
    }

    /// The pushes a worker's simulator recorded, by token, in arrival order.
    static func pushesByToken(_ record: URL) -> [String: [RecordedLine]] {
        Dictionary(grouping: recordedPushes(record), by: \.token)
    }

    func record(_ name: String) -> URL { directory.appendingPathComponent("\(name).jsonl") }
}

/// Every push a simulator recorded in `file` (`--record`, `--simulator-record`), in arrival order.
func recordedPushes(_ file: URL) -> [RecordedLine] {
    guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { line in
        (try? JSONValue.parse(String(line))).map(RecordedLine.init(value:))
    }
}
