import APNs
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTesting
import Logging
#if canImport(Glibc)
import Glibc
#endif
import NIOSSL
import PlainHTTP
import Synchronization

/// `livedispatch-bench fanout`: one update fanned out to N tokens by a worker
/// running as its own process, beside the APNs client alone.
struct BenchFanOutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Measure one update fanned out to N tokens by a worker process, and the APNs client alone.",
        discussion: """
            Runs the APNs simulator in this process (--simulator-threads event loops) and a worker as a child \
            process (`livedispatch run`), over the Kafka cluster given by --bootstrap-servers or an embedded one \
            in this process. Registers --tokens tokens over --activities activities, waits until the worker has \
            stored them, publishes one update per activity and times until the simulator has accepted a push for \
            every token. Then sends as many pushes with the APNs client alone over the same connections, reads the \
            worker's peak RSS, restarts the worker and times its restore until /readyz answers ready. \
            The embedded cluster keeps at most 100,000 records and 5 MB per partition: beyond about 40,000 tokens \
            per partition use a real broker (scripts/real-broker).
            """
    )

    @Option(help: "Tokens registered in all.") var tokens = 100_000
    @Option(help: "Activities the tokens are spread over.") var activities = 1
    @Option(name: .customLong("bootstrap-servers"), help: "Kafka to use (host:port,…); an embedded cluster when omitted.")
    var bootstrapServers: String?
    @Option(help: "HTTP/2 connections to APNs, for the worker and the client alone.") var connections = 4
    @Option(help: "Partitions of each topic.") var partitions = 6
    @Option(name: .customLong("simulator-threads"), help: "Event loops of the simulator.") var simulatorThreads = 2
    @Option(help: "Milliseconds the simulator waits before answering each push (APNs far away).") var latency: Int64 = 0
    @Option(name: .customLong("max-in-flight"), help: "limits.max_in_flight_per_activity of the worker.")
    var maxInFlight = 4_000
    @Option(name: .customLong("max-in-flight-per-worker"), help: "limits.max_in_flight_per_worker of the worker (default: the worker's).")
    var maxInFlightPerWorker: Int?
    @Option(help: "Rules directory the worker loads.") var rules = "Config/rules"
    @Flag(help: "Keep the worker's configuration and log (printed at the end).") var keep = false

    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"
    static let bundleID = "com.example.livedispatch"

    func validate() throws {
        guard tokens >= 1, activities >= 1, activities <= tokens else {
            throw ValidationError("--tokens and --activities must be at least 1, with no more activities than tokens")
        }
        guard connections >= 1, partitions >= 1, simulatorThreads >= 1, maxInFlight >= 1 else {
            throw ValidationError("--connections, --partitions, --simulator-threads and --max-in-flight must be at least 1")
        }
        guard (0...60_000).contains(latency) else {
            throw ValidationError("--latency: expected 0 to 60000 milliseconds, got \(latency)")
        }
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .error
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-fanout-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)

        let key = P256.Signing.PrivateKey()
        let keyPath = directory.appendingPathComponent("key.p8").path
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw BenchError(description: "cannot write \(keyPath)")
        }
        // The simulator counts pushes and keeps no summary per token: a
        // table of a million tokens growing under its lock cost it as much
        // as the pushes, for the worker's distinct tokens and not for the
        // client alone's repeated ones (BENCHMARKS.md, "Fan-out").
        var simulatorConfiguration = APNsSimulator.Configuration(
            teamID: Self.teamID, keyID: Self.keyID, publicKey: key.publicKey, bundleID: Self.bundleID,
            faults: SimulatorFaults(latencyMilliseconds: latency), historyLimit: 1_000, threads: simulatorThreads)
        simulatorConfiguration.tokenSummaries = false
        let simulator = try await APNsSimulator.start(configuration: simulatorConfiguration, logger: logger)
        let certificatePath = directory.appendingPathComponent("simulator.pem").path
        try Data(simulator.certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))

        let prefix = "fanout\(UUID().uuidString.prefix(6).lowercased())."
        var embedded: EmbeddedKafkaCluster?
        let bootstrap: String
        if let bootstrapServers {
            bootstrap = bootstrapServers
            // The router subscribes to the rules' topics: they must exist.
            let ruleTopics = try RuleSetStore(directory: rules).current.topics
            let admin = try KafkaAdmin(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrapServers]), logger: logger)
            try await admin.createTopics(ruleTopics.sorted().map { KafkaTopicSpecification(name: $0, partitions: partitions) })
        } else {
            let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            let ruleTopics = try RuleSetStore(directory: rules).current.topics
            for topic in InternalTopic.allCases.map({ prefix + $0.rawValue }) + ruleTopics.sorted() {
                try cluster.createTopic(topic, partitions: partitions)
            }
            embedded = cluster
            bootstrap = cluster.bootstrapServers
            let perPartition = tokens / min(activities, partitions)
            if perPartition > 40_000 {
                print("warning: about \(perPartition) token records per partition: the embedded cluster drops records beyond 5 MB per partition; use --bootstrap-servers")
            }
        }
        defer { _ = embedded }

        let adminPort = try freePort()
        let configurationPath = directory.appendingPathComponent("worker.yaml").path
        try Data(workerConfiguration(bootstrap: bootstrap, prefix: prefix, adminPort: adminPort, simulator: simulator, keyPath: keyPath, certificatePath: certificatePath).utf8)
            .write(to: URL(fileURLWithPath: configurationPath))
        let admin = "http://127.0.0.1:\(adminPort)"
        let logPath = directory.appendingPathComponent("worker.log").path
        let restartLogPath = directory.appendingPathComponent("worker-restarted.log").path

        var producerConfiguration = KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]))
        producerConfiguration.linger = .milliseconds(5)
        producerConfiguration.maxQueuedRecords = 1_000_000
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)

        var worker = try WorkerProcess(configuration: configurationPath, log: logPath)
        defer { worker.stop() }
        try await worker.waitUntilReady(admin: admin, timeout: 120)
        let residentEmpty = worker.residentMegabytes()

        // Tokens, in chunks so the producer's queue stays bounded.
        let registerStart = ContinuousClock.now
        var sent = 0
        while sent < tokens {
            var pending: [KafkaPendingDelivery] = []
            for index in sent..<min(tokens, sent + 100_000) {
                let activity = "fanout-\(index % activities)"
                let value = #"{"activity_id":"\#(activity)","token":"\#(Self.token(index))"}"#
                pending.append(try producer.enqueue(topic: prefix + "tokens", key: Array(activity.utf8), value: Array(value.utf8)))
            }
            for delivery in pending { _ = try await delivery.wait() }
            sent += pending.count
        }
        try await waitUntil("the worker to store \(tokens) tokens (log: \(logPath))", timeout: .seconds(max(120, Double(tokens) / 2_000)), longestPause: .milliseconds(20)) {
            guard worker.isRunning else { throw BenchError(description: "the worker exited; see \(logPath)") }
            guard let metrics = try? await httpGet(admin + "/metrics").body else { return false }
            guard Self.sample("livedispatch_records_consumed_total", labels: #"topic="tokens""#, in: metrics) >= Double(tokens) else { return false }
            // Every registration read is stored once nothing is in progress.
            guard let body = try? await httpGet(admin + "/status").body, let status = try? JSONValue.parse(body) else { return false }
            return status["in_progress"]?.integerValue == 0
        }
        let registered = ContinuousClock.now - registerStart

        // A warm-up command (an activity without tokens) so the producer knows
        // the topic and the worker's fetchers are running; then one update
        // per activity, done when every token has accepted a push.
        let warmUpStart = ContinuousClock.now
        _ = try await producer.send(
            topic: prefix + "commands", key: Array("fanout-warm-up".utf8),
            value: Array(#"{"activity_id":"fanout-warm-up","event":"update","content_state":{"score":0}}"#.utf8))
        try await waitUntil("the warm-up command to be dispatched (log: \(logPath))", timeout: .seconds(60), longestPause: .milliseconds(20)) {
            guard let metrics = try? await httpGet(admin + "/metrics").body else { return false }
            return Self.sample("livedispatch_commands_dispatched_total", labels: "", in: metrics) >= 1
        }
        let warmUp = (ContinuousClock.now - warmUpStart).seconds
        let baseline = simulator.acceptedCount
        let residentBefore = worker.residentMegabytes()
        let residentDuring = Mutex(residentBefore)
        let fanOutStart = ContinuousClock.now
        for index in 0..<activities {
            let activity = "fanout-\(index)"
            let value = #"{"activity_id":"\#(activity)","event":"update","content_state":{"score":1}}"#
            _ = try producer.enqueue(topic: prefix + "commands", key: Array(activity.utf8), value: Array(value.utf8))
        }
        try await waitUntil("every token to get the update (log: \(logPath))", timeout: .seconds(max(120, Double(tokens) / 2_000)), longestPause: .milliseconds(20)) {
            guard worker.isRunning else { throw BenchError(description: "the worker exited; see \(logPath)") }
            let resident = worker.residentMegabytes()
            residentDuring.withLock { $0 = max($0, resident) }
            return simulator.acceptedCount - baseline >= tokens
        }
        let fanOut = (ContinuousClock.now - fanOutStart).seconds
        let peakRSS = worker.peakResidentMegabytes()

        let clientRate = try await clientAlone(simulator: simulator, key: key, certificatePath: certificatePath, logger: logger)

        // Restore: a new worker process reads the changelogs back.
        worker.stop()
        let restoreStart = ContinuousClock.now
        worker = try WorkerProcess(configuration: configurationPath, log: restartLogPath)
        try await worker.waitUntilReady(admin: admin, timeout: max(120, Double(tokens) / 5_000))
        let untilReady = (ContinuousClock.now - restoreStart).seconds
        // The worker reports ready as its last partition restores, and logs
        // that restore just after: wait for every partition's line.
        try await waitUntil("a `Partition restored` line for each of the \(partitions) partitions", timeout: .seconds(30), longestPause: .milliseconds(20)) {
            Self.restoreReport(log: restartLogPath).partitions >= partitions
        }
        let restored = Self.restoreReport(log: restartLogPath)
        let residentRestored = (now: worker.residentMegabytes(), peak: worker.peakResidentMegabytes())
        worker.stop()
        try await producer.flush()
        try await simulator.stop()

        let rate = Double(tokens) / fanOut
        print(String(format: "fanout: %d tokens delivered in %.2f s: %.0f pushes/s", tokens, fanOut, rate))
        print(String(format: "client alone: %.0f pushes/s", clientRate))
        print(String(format: "ratio: %.2f", rate / clientRate))
        print(String(format: "worker peak rss: %.0f MB", peakRSS))
        print(String(format: "worker rss: %.0f MB before the update, %.0f MB at most during the fan-out (sampled)",
                     residentBefore, residentDuring.withLock { $0 }))
        print(String(format: "restore: %d tokens in %.2f s", restored.tokens, restored.seconds))
        print(String(format: "worker rss: %.0f MB ready without tokens; restarted, %.0f MB once restored (peak %.0f MB)",
                     residentEmpty, residentRestored.now, residentRestored.peak))
        print(String(format: "restart until ready: %.2f s (joining both groups, then the restore)", untilReady))
        print(String(format: "warm-up command dispatched in %.2f s", warmUp))
        print(String(format: "tokens registered and stored in %.2f s; activities: %d, connections: %d, partitions: %d, kafka: %@",
                     registered.seconds, activities, connections, partitions, bootstrapServers ?? "embedded"))
        if keep { print("files: \(directory.path)") } else { try? FileManager.default.removeItem(at: directory) }
    }

    /// The same number of pushes over the same connections, from the APNs
    /// client alone, in batches as the dispatcher sends them.
    private func clientAlone(simulator: APNsSimulator, key: P256.Signing.PrivateKey, certificatePath: String, logger: Logger) async throws -> Double {
        let configuration = APNsClientConfiguration(
            endpoint: .init(host: simulator.host, port: simulator.port), connections: connections, maxQueued: 8_000,
            requestTimeout: 30, additionalTrustRoots: try NIOSSLCertificate.fromPEMFile(certificatePath))
        let pool = try APNsConnectionPool(
            configuration: configuration, signingKey: APNsSigningKey(privateKey: key, keyID: Self.keyID, teamID: Self.teamID), logger: logger)
        let payload = Array(#"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"score":1}}}"#.utf8)
        let tokens = try (0..<min(self.tokens, 10_000)).map { try DeviceToken(hex: Self.token($0)) }
        func request(_ index: Int) -> APNsRequest {
            APNsRequest(
                destination: .device(tokens[index % tokens.count]), bundleID: Self.bundleID, priority: .immediate,
                expiration: nil, apnsID: BenchAPNsCommand.apnsIDs.next(), payload: payload)
        }
        for index in 0..<connections { _ = await pool.send(request(index)) }
        let total = self.tokens
        let batch = 500
        let senders = max(1, (connections * 1_000) / batch)
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    var next = sender * batch
                    while next < total {
                        _ = await pool.send((next..<min(total, next + batch)).map(request))
                        next += senders * batch
                    }
                }
            }
        }
        let elapsed = (ContinuousClock.now - start).seconds
        await pool.shutdown()
        return Double(total) / elapsed
    }

    /// Tokens restored and the longest partition restore (partitions restore
    /// concurrently), from the worker's `Partition restored` log lines.
    static func restoreReport(log: String) -> (tokens: Int, seconds: Double, partitions: Int) {
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains("Partition restored") }
        func value(_ name: String, _ line: Substring) -> Double? {
            guard let range = line.range(of: name + "=") else { return nil }
            return Double(line[range.upperBound...].prefix { !$0.isWhitespace })
        }
        let tokens = lines.compactMap { value("restore.tokens", $0) }.reduce(0, +)
        let seconds = lines.compactMap { value("restore.seconds", $0) }.max() ?? .nan
        return (Int(exactly: tokens) ?? 0, seconds, lines.count)
    }

    /// A 32-byte token that tells its index.
    static func token(_ index: Int) -> String {
        String(format: "%016llx", UInt64(index)) + String(repeating: "fa", count: 24)
    }

    /// The sum of a metric's samples whose labels contain `labels`.
    static func sample(_ name: String, labels: String, in text: String) -> Double {
        text.split(separator: "\n")
            .filter { ($0.hasPrefix(name + "{") || $0.hasPrefix(name + " ")) && (labels.isEmpty || $0.contains(labels)) }
            .compactMap { Double($0.split(separator: " ").last ?? "") }
            .reduce(0, +)
    }

    private func workerConfiguration(
        bootstrap: String, prefix: String, adminPort: Int, simulator: APNsSimulator, keyPath: String, certificatePath: String
    ) -> String {
        var file = BenchWorkerFile(
            bootstrap: bootstrap, prefix: prefix, partitions: partitions, rules: rules,
            apnsEndpoint: "\(simulator.host):\(simulator.port)", keyPath: keyPath, certificatePath: certificatePath,
            adminPort: adminPort)
        file.createTopics = bootstrapServers != nil
        file.connections = connections
        file.window = "10ms"
        file.maxInFlightPerActivity = maxInFlight
        file.maxInFlightPerWorker = maxInFlightPerWorker
        return file.yaml
    }
}

/// A GET to a worker's HTTP listener: the status and the body.
func httpGet(_ url: String) async throws -> (status: Int, body: String) {
    let response = try await PlainHTTPClient.send(.GET, url, timeout: .seconds(5))
    return (response.status, response.text)
}
