import ArgumentParser
import Foundation
import LiveDispatchBench
import LiveDispatchRules
import LiveDispatchTesting
import Logging

/// `livedispatch-bench idle`: what workers with no traffic cost themselves
/// and the broker.
struct BenchIdleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle",
        abstract: "Start workers with no traffic and print their CPU, the broker's CPU and the requests they send it.",
        discussion: """
            Starts the APNs simulator and --workers workers (`livedispatch run`, --partitions partitions per topic) \
            against --bootstrap-servers (a fresh broker: Tansu from `scripts/real-broker start`, run with \
            LD_LIBRARY_PATH="$(scripts/real-broker library-path)") or, without it, an embedded cluster \
            (`livedispatch kafka embedded`). It waits until every worker is ready, the `commands` partitions are \
            owned and the domain topics' partitions routed between them with none moving, and nothing is in \
            progress, then measures over --seconds: each worker's CPU and the broker's (from /proc/PID/stat; \
            the broker's pid is --broker-pid, or the embedded cluster's), and the requests the workers send \
            the broker: the data segments their TCP connections to the broker's port sent (the kernel's \
            data_segs_out counters, read with `ss`; an idle Kafka client sends one segment per request, fetches \
            and heartbeats alike). The workers' consumers use their default fetch wait (librdkafka's 500 ms \
            long poll) unless --fetch-wait-ms sets one. Exits 1 when the partitions moved during the measurement.
            """
    )

    @Option(name: .customLong("bootstrap-servers"), help: "The broker (host:port); an embedded cluster when omitted.")
    var bootstrapServers: String?
    @Option(help: "Worker processes.") var workers = 4
    @Option(help: "Partitions of each topic.") var partitions = 12
    @Option(help: "Seconds to measure, once the workers settled.") var seconds = 30.0
    @Option(name: .customLong("broker-pid"), help: "The broker's process id, to measure its CPU (with --bootstrap-servers).")
    var brokerPID: Int32?
    @Option(
        name: .customLong("fetch-wait-ms"),
        help: "fetch.wait.max.ms of the workers' consumers (default: the worker's own, librdkafka's 500 ms).")
    var fetchWaitMilliseconds: Int?
    @Option(help: "Rules directory the workers load (its topics are the domain topics).") var rules = "Config/rules"
    @Option(name: .customLong("settle-timeout"), help: "Longest wait, in seconds, for the workers to settle.")
    var settleTimeout = 180.0

    func validate() throws {
        guard workers >= 1 else { throw ValidationError("--workers must be at least 1, got \(workers)") }
        guard partitions >= 1 else { throw ValidationError("--partitions must be at least 1, got \(partitions)") }
        guard seconds > 0, seconds.isFinite else { throw ValidationError("--seconds must be positive, got \(seconds)") }
        guard settleTimeout > 0, settleTimeout.isFinite else { throw ValidationError("--settle-timeout must be positive, got \(settleTimeout)") }
        if let fetchWaitMilliseconds, !(0...300_000).contains(fetchWaitMilliseconds) {
            throw ValidationError("--fetch-wait-ms must be 0 to 300000, got \(fetchWaitMilliseconds)")
        }
        if brokerPID != nil, bootstrapServers == nil {
            throw ValidationError("--broker-pid names the broker of --bootstrap-servers; the embedded cluster's pid is known")
        }
        if let bootstrapServers, Self.ports(of: bootstrapServers) == nil {
            throw ValidationError("--bootstrap-servers: expected host:port[,host:port…], got \(bootstrapServers.debugDescription)")
        }
    }

    /// The ports of `host:port,host:port…`; nil when one has none.
    static func ports(of servers: String) -> Set<Int>? {
        var ports: Set<Int> = []
        for server in servers.split(separator: ",") {
            guard let colon = server.lastIndex(of: ":"), let port = Int(server[server.index(after: colon)...]), (1...65_535).contains(port)
            else { return nil }
            ports.insert(port)
        }
        return ports.isEmpty ? nil : ports
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench.idle") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .critical
        let ruleTopics: [String]
        do {
            ruleTopics = try RuleSet.load(directory: rules).topics.sorted()
        } catch {
            throw BenchError(description: "--rules \(rules): " + error.diagnostics.map(\.description).joined(separator: "\n"))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-idle-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A fresh prefix and groups per run: the internal topics of an earlier run are not read.
        let prefix = "idle\(UUID().uuidString.prefix(6).lowercased())."
        let stack = try await BenchStack.start(
            directory: directory, prefix: prefix, partitions: partitions, rules: rules, ruleTopics: ruleTopics,
            simulatorOptions: [], workers: workers, broker: bootstrapServers, fetchWaitMilliseconds: fetchWaitMilliseconds, logger: logger)
        defer { stack.stop() }
        guard let brokerPorts = Self.ports(of: stack.bootstrap) else {
            throw BenchError(description: "the broker's address \(stack.bootstrap) has no port")
        }
        let brokerPID = self.brokerPID ?? stack.kafka?.process.processIdentifier

        let before = try await settled(stack, topics: ruleTopics, logs: directory.path)
        let pids = stack.fleet.processIdentifiers
        let startedAt = ContinuousClock.now
        let workerCPU = pids.map(ProcessCPUTime.of(pid:))
        let brokerCPU = brokerPID.flatMap(ProcessCPUTime.of(pid:))
        let sockets = try Self.sockets()
        try await Task.sleep(for: .seconds(seconds))
        let laterSockets = try Self.sockets()
        let laterWorkerCPU = pids.map(ProcessCPUTime.of(pid:))
        let laterBrokerCPU = brokerPID.flatMap(ProcessCPUTime.of(pid:))
        let elapsed = (ContinuousClock.now - startedAt).seconds
        let after = await stack.fleet.statuses()

        let figures = IdleFigures(
            workerPercents: zip(workerCPU, laterWorkerCPU).map { earlier, later in
                earlier.flatMap { earlier in later?.percentOfACore(since: earlier, seconds: elapsed) }
            },
            brokerPercent: brokerCPU.flatMap { earlier in laterBrokerCPU?.percentOfACore(since: earlier, seconds: elapsed) },
            brokerPID: brokerPID,
            requestsPerSecond: Double(laterSockets.segmentsSent(since: sockets, pids: Set(pids), peerPorts: brokerPorts)) / elapsed)
        print(figures.line)
        let load = LoadAverage.current()
        print(String(format: "measured over %.1f s; fetch.wait.max.ms %@; %d partitions; broker %@; load average %@",
                     elapsed, fetchWaitMilliseconds.map(String.init) ?? "default", partitions, bootstrapServers ?? "embedded", load))
        let owners = after.flatMap { WorkerStatus.owners($0, workers: workers, partitions: partitions) }
        guard let owners, owners == before else {
            print("the partitions moved during the measurement; the figures include a rebalance")
            throw ExitCode(1)
        }
    }

    /// Waits until every worker owns its share of `commands`, none moving,
    /// the domain topics are routed between them and nothing is in
    /// progress; returns the owners.
    private func settled(_ stack: BenchStack, topics: [String], logs: String) async throws -> [Int: String] {
        let workers = self.workers, partitions = self.partitions
        return try await waitFor(
            "\(workers) workers to own and route the \(partitions) partitions between them, nothing in progress",
            timeout: .seconds(settleTimeout), longestPause: .milliseconds(200)
        ) { () -> [Int: String]? in
            guard stack.fleet.processIdentifiers.count == workers else {
                throw BenchError(description: "a worker exited; see the logs in \(logs)")
            }
            guard let statuses = await stack.fleet.statuses(),
                  let owners = WorkerStatus.owners(statuses, workers: workers, partitions: partitions),
                  topics.allSatisfy({ WorkerStatus.routers(statuses, workers: workers, topic: $0, partitions: partitions) != nil }),
                  statuses.values.allSatisfy({ $0.inProgress == 0 })
            else { return nil }
            return owners
        }
    }

    /// The established TCP connections and their counters, from `ss`.
    static func sockets() throws -> SocketSegments {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
        process.arguments = ["-H", "-t", "-i", "-n", "-p", "state", "established"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw BenchError(description: "cannot run /usr/bin/ss (iproute2), which counts the requests: \(error)")
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError(description: "ss exited with status \(process.terminationStatus)") }
        return SocketSegments(ssOutput: String(decoding: data, as: UTF8.self))
    }
}
