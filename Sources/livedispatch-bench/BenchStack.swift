import Crypto
import Foundation
import Kafka
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchTesting
import Logging
import Synchronization

/// The processes of a run: an embedded Kafka cluster (`livedispatch kafka
/// embedded --control`) with the topics, or a broker given by its bootstrap
/// servers, the APNs simulator (`livedispatch simulate apns`), the workers,
/// and the benchmark's producer.
struct BenchStack {
    /// nil when the run uses a broker of its own (`broker`).
    var kafka: ChildProcess?
    var simulator: ChildProcess
    var fleet: WorkerFleet
    var producer: KafkaProducer
    var bootstrap: String

    static func start(
        directory: URL, prefix: String, partitions: Int, rules: String, ruleTopics: [String], simulatorOptions: [String],
        workers: Int, broker: String? = nil, producerLinger: Duration = .milliseconds(5), window: String = "50ms",
        sessionTimeoutMilliseconds: Int = 6000, idempotentProducer: Bool = false,
        fetchWaitMilliseconds: Int? = BenchWorkerFile.testBrokerFetchWaitMilliseconds, logger: Logger
    ) async throws -> BenchStack {
        let kafka: ChildProcess?
        if broker == nil {
            let topics = InternalTopic.allCases.map { prefix + $0.rawValue } + ruleTopics
            kafka = try ChildProcess(
                ["kafka", "embedded", "--brokers", "1", "--control"] + topics.flatMap { ["--topic", "\($0):\(partitions)"] },
                log: directory.appendingPathComponent("kafka.log").path, captureOutput: true)
        } else {
            kafka = nil
        }
        var simulator: ChildProcess?
        do {
            let bootstrap: String
            if let kafka {
                bootstrap = try await kafka.waitForLine(prefix: "bootstrap: ", timeout: 60)
            } else {
                bootstrap = broker ?? ""
                // The workers create the internal topics; the events' topics are created here.
                let admin = try KafkaAdmin(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), logger: logger)
                try await admin.createTopics(ruleTopics.map { KafkaTopicSpecification(name: $0, partitions: partitions) })
            }
            let key = P256.Signing.PrivateKey()
            let keyPath = directory.appendingPathComponent("key.p8").path
            guard FileManager.default.createFile(atPath: keyPath, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw BenchError(description: "cannot write \(keyPath)")
            }
            let certificatePath = directory.appendingPathComponent("simulator.pem").path
            let started = try ChildProcess(
                ["simulate", "apns", "--team-id", BenchFanOutCommand.teamID, "--key-id", BenchFanOutCommand.keyID,
                 "--bundle-id", BenchFanOutCommand.bundleID, "--key", keyPath, "--cert-out", certificatePath,
                 "--history", "1000", "--threads", "1"] + simulatorOptions,
                log: directory.appendingPathComponent("simulator.log").path, captureOutput: true)
            simulator = started
            let endpoint = try await started.waitForLine(prefix: "listening: ", timeout: 60)
            let fleet = WorkerFleet(
                configuration: BenchWorkerFile(
                    bootstrap: bootstrap, prefix: prefix, partitions: partitions, rules: rules, apnsEndpoint: endpoint,
                    keyPath: keyPath, certificatePath: certificatePath, adminPort: 0, createTopics: kafka == nil, connections: 2,
                    window: window, sessionTimeoutMilliseconds: sessionTimeoutMilliseconds, fetchWaitMilliseconds: fetchWaitMilliseconds),
                directory: directory)
            do {
                try await fleet.start(workers)
                var configuration = KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]))
                configuration.linger = producerLinger
                configuration.idempotent = idempotentProducer
                configuration.maxQueuedRecords = 1_000_000
                let producer = try KafkaProducer(configuration: configuration, logger: logger)
                return BenchStack(kafka: kafka, simulator: started, fleet: fleet, producer: producer, bootstrap: bootstrap)
            } catch {
                fleet.stopAll()
                throw error
            }
        } catch {
            simulator?.stop()
            kafka?.stop()
            throw error
        }
    }

    /// Workers first, then the simulator and the cluster.
    func stop() {
        fleet.stopAll()
        simulator.stop()
        kafka?.stop()
    }
}

/// The workers of a row, some started and stopped while it runs.
final class WorkerFleet: Sendable {
    private struct Member {
        var process: WorkerProcess
        var admin: String
        /// Told to stop (it may still be draining).
        var stopping = false
    }

    private let configuration: BenchWorkerFile
    private let directory: URL
    private let members = Mutex<[Member]>([])
    private let peak = Mutex<Double>(0)
    private let started = Atomic<Int>(0)

    init(configuration: BenchWorkerFile, directory: URL) {
        self.configuration = configuration
        self.directory = directory
    }

    /// Starts `count` workers and waits until each is ready.
    func start(_ count: Int) async throws {
        var added: [Member] = []
        for _ in 0..<count {
            let number = started.wrappingAdd(1, ordering: .relaxed).oldValue + 1
            var file = configuration
            file.adminPort = try freePort()
            let path = directory.appendingPathComponent("worker-\(number).yaml").path
            try Data(file.yaml.utf8).write(to: URL(fileURLWithPath: path))
            let process = try WorkerProcess(configuration: path, log: directory.appendingPathComponent("worker-\(number).log").path)
            added.append(Member(process: process, admin: "http://127.0.0.1:\(file.adminPort)"))
            members.withLock { $0.append(added[added.count - 1]) }
        }
        for member in added { try await member.process.waitUntilReady(admin: member.admin, timeout: 120) }
    }

    /// Process ids of the workers running and not told to stop.
    var processIdentifiers: [Int32] {
        members.withLock { $0.filter { $0.process.isRunning && !$0.stopping }.map(\.process.processIdentifier) }
    }

    /// Admin URLs of the workers running and not told to stop.
    var admins: [String] { members.withLock { $0.filter { $0.process.isRunning && !$0.stopping }.map(\.admin) } }

    /// Records the peak RSS of every worker running; returns the largest seen so far.
    @discardableResult
    func samplePeak() -> Double {
        let current = members.withLock { $0.map { $0.process.peakResidentMegabytes() }.filter { !$0.isNaN } }.max() ?? 0
        return peak.withLock { peak in
            peak = max(peak, current)
            return peak
        }
    }

    /// Ends the most recently started workers that still run: SIGKILL when `kill`, else SIGTERM.
    func end(_ count: Int, kill: Bool) {
        samplePeak()
        let chosen = members.withLock { members in Array(members.filter(\.process.isRunning).suffix(count)) }
        for member in chosen { kill ? member.process.kill() : member.process.stop() }
    }

    /// Signals the `count` most recently started workers that run and were
    /// not told to stop yet, all at once: the first `killing` of them
    /// SIGKILL, the others SIGTERM. Does not wait for them to exit; from now
    /// on `admins` leaves them out. Returns them, to see when they exit.
    func signal(_ count: Int, killing: Int) -> [WorkerProcess] {
        samplePeak()
        let chosen = members.withLock { members in
            let indices = Array(members.indices.filter { members[$0].process.isRunning && !members[$0].stopping }.suffix(count))
            for index in indices { members[index].stopping = true }
            return indices.map { members[$0].process }
        }
        for (index, process) in chosen.enumerated() { index < killing ? process.sendKill() : process.sendTerminate() }
        return chosen
    }

    /// Registers each (activity id, token) and waits until the workers have stored them.
    func register(_ registrations: [(activity: String, token: String)], topic: String, producer: KafkaProducer) async throws {
        var pending: [KafkaPendingDelivery] = []
        for (activity, token) in registrations {
            pending.append(try producer.enqueue(
                topic: topic, key: Array(activity.utf8), value: Array(#"{"activity_id":"\#(activity)","token":"\#(token)"}"#.utf8)))
        }
        for delivery in pending { _ = try await delivery.wait() }
        let count = Double(pending.count)
        try await waitUntil("the workers to store \(pending.count) tokens (logs in \(directory.path))", timeout: .seconds(max(120, count / 1_000)), longestPause: .milliseconds(20)) {
            var consumed = 0.0
            for admin in admins {
                guard let metrics = try? await httpGet(admin + "/metrics").body,
                      let body = try? await httpGet(admin + "/status").body, let status = try? JSONValue.parse(body),
                      status["in_progress"]?.integerValue == 0
                else { return false }
                consumed += BenchFanOutCommand.sample("livedispatch_records_consumed_total", labels: #"topic="tokens""#, in: metrics)
            }
            return consumed >= count
        }
    }

    /// Whether every worker running answers `/status` with nothing in progress.
    func nothingInProgress() async -> Bool {
        await statuses()?.values.allSatisfy { $0.inProgress == 0 } ?? false
    }

    /// What each worker running says of itself on `/status`, by admin URL;
    /// nil while one of them does not answer.
    func statuses() async -> [String: WorkerStatus]? {
        var statuses: [String: WorkerStatus] = [:]
        for admin in admins {
            guard let body = try? await httpGet(admin + "/status").body, let status = WorkerStatus(json: body) else { return nil }
            statuses[admin] = status
        }
        return statuses
    }

    /// Current resident set (`VmRSS`) of the first worker still running, in MB.
    func residentMegabytes() -> Double {
        members.withLock { $0.first(where: \.process.isRunning)?.process.residentMegabytes() } ?? .nan
    }

    func stopAll() {
        samplePeak()
        for member in members.withLock({ $0 }) { member.process.stop() }
    }
}
