import Foundation
import LiveDispatchBench
import LiveDispatchTesting
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The configuration file of a worker a benchmark runs as a child process.
struct BenchWorkerFile {
    var bootstrap: String
    var prefix: String
    var partitions: Int
    var rules: String
    /// `host:port` of the APNs server.
    var apnsEndpoint: String
    var keyPath: String
    var certificatePath: String
    var adminPort: Int
    var createTopics = false
    var connections = 4
    var window = "10ms"
    /// The consumer groups' `session.timeout.ms`; members heartbeat four times in it, at most every 500 ms.
    var sessionTimeoutMilliseconds = 6000
    /// The consumers' `fetch.wait.max.ms`; nil for the worker's default
    /// (librdkafka's 500 ms long poll). The brokers the benchmarks run
    /// against, librdkafka's mock cluster and Tansu, hold an empty fetch for
    /// its whole wait instead of answering when a record arrives, as Apache
    /// Kafka does, so the benchmarks set a short wait of their own.
    var fetchWaitMilliseconds: Int? = BenchWorkerFile.testBrokerFetchWaitMilliseconds
    var maxInFlightPerActivity = 256
    /// The worker's default when nil.
    var maxInFlightPerWorker: Int?
    var teamID = BenchFanOutCommand.teamID
    var keyID = BenchFanOutCommand.keyID
    var bundleID = BenchFanOutCommand.bundleID

    /// The fetch wait the benchmarks' brokers need (see `fetchWaitMilliseconds`).
    static let testBrokerFetchWaitMilliseconds = 10

    var yaml: String {
        """
        kafka:
          bootstrap: \(bootstrap)
          group_id: \(prefix)bench
          topic_prefix: \(prefix)
          create_topics: \(createTopics)
          partitions: \(partitions)
          properties:
            log_level: "3"
            session.timeout.ms: "\(sessionTimeoutMilliseconds)"
            heartbeat.interval.ms: "\(min(500, max(100, sessionTimeoutMilliseconds / 4)))"\(fetchWaitMilliseconds.map { "\n    fetch.wait.max.ms: \"\($0)\"" } ?? "")
        rules:
          path: \(rules)
          reload_interval: 0
        apns:
          endpoint: \(apnsEndpoint)
          bundle_id: \(bundleID)
          team_id: \(teamID)
          key_id: \(keyID)
          key_path: \(keyPath)
          trust_roots: [\(certificatePath)]
          connections: \(connections)
        coalesce:
          window: \(window)
          max_delay: \(window)
        limits:
          max_in_flight_per_activity: \(maxInFlightPerActivity)\(maxInFlightPerWorker.map { "\n  max_in_flight_per_worker: \($0)" } ?? "")
        admin:
          listen: "127.0.0.1:\(adminPort)"
        """
    }
}

/// A `livedispatch` subcommand run as a child process of a benchmark:
/// standard error (and standard output, unless captured) to a log file,
/// standard input a pipe.
final class ChildProcess: Sendable {
    let process: Process
    let log: String
    private let input = Pipe()
    private let output = OutputBuffer()
    private let exit = ExitRecord()
    private let captured: Pipe?

    init(_ arguments: [String], log: String, captureOutput: Bool) throws {
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        guard let logHandle = FileHandle(forWritingAtPath: log) else { throw BenchError(description: "cannot write \(log)") }
        logHandle.seekToEndOfFile()
        self.log = log
        process = Process()
        process.executableURL = try Self.livedispatch()
        process.arguments = arguments
        process.standardError = logHandle
        process.standardInput = input
        if captureOutput {
            let pipe = Pipe()
            captured = pipe
            process.standardOutput = pipe
            let output = self.output
            pipe.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                output.bytes.withLock { $0.append(contentsOf: data) }
            }
        } else {
            captured = nil
            process.standardOutput = logHandle
        }
        let exit = self.exit
        process.terminationHandler = { _ in exit.at.withLock { $0 = .now } }
        try process.run()
    }

    /// The `livedispatch` executable built beside this one: the benchmarks
    /// run their workers, clusters and simulators with what operators run.
    static func livedispatch() throws -> URL {
        let bench = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let url = bench.deletingLastPathComponent().appendingPathComponent("livedispatch")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw BenchError(description: "no livedispatch executable beside \(bench.path): build both (swift build)")
        }
        return url
    }

    var isRunning: Bool { process.isRunning }

    /// When the process was seen to exit; nil while it runs.
    var exitedAt: ContinuousClock.Instant? { exit.at.withLock { $0 } }

    /// Complete lines of standard output so far.
    var outputLines: [String] {
        output.bytes.withLock { bytes in
            guard let end = bytes.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
            return String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    /// What follows `prefix` on the first output line that starts with it.
    func waitForLine(prefix: String, timeout: Double) async throws -> String {
        var found: String?
        try await waitUntil("\(prefix) from `livedispatch \(process.arguments?.prefix(2).joined(separator: " ") ?? "")` (log: \(log))", timeout: .seconds(timeout), longestPause: .milliseconds(20)) {
            guard process.isRunning else {
                throw BenchError(description: "`livedispatch \(process.arguments?.prefix(2).joined(separator: " ") ?? "")` exited; see \(log)")
            }
            found = outputLines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
            return found != nil
        }
        return found ?? ""
    }

    /// Writes one line to standard input.
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// `VmHWM` of the process: its peak resident set, in MB (nan once gone).
    func peakResidentMegabytes() -> Double { statusMegabytes("VmHWM:") }

    /// `VmRSS` of the process: its resident set now, in MB (nan once gone).
    func residentMegabytes() -> Double { statusMegabytes("VmRSS:") }

    private func statusMegabytes(_ field: String) -> Double { ProcessStatus.megabytes(field, process: String(process.processIdentifier)) }

    /// SIGTERM (an orderly stop; standard input closed too), then waits for the exit.
    func stop() {
        let running = process.isRunning
        sendTerminate()
        guard running else { return }
        process.waitUntilExit()
        captured?.fileHandleForReading.readabilityHandler = nil
    }

    /// SIGKILL: the process ends at once, nothing drained or committed.
    func kill() {
        let running = process.isRunning
        sendKill()
        guard running else { return }
        process.waitUntilExit()
    }

    /// SIGTERM with standard input closed, without waiting for the exit.
    func sendTerminate() {
        try? input.fileHandleForWriting.close()
        guard process.isRunning else { return }
        process.terminate()
    }

    /// SIGKILL, without waiting for the exit.
    func sendKill() {
        guard process.isRunning else { return }
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
    }
}

/// A worker (`livedispatch run`) run as a child process of a benchmark, its log in a file.
struct WorkerProcess {
    private let child: ChildProcess

    init(configuration: String, log: String) throws {
        child = try ChildProcess(["run", "--config", configuration], log: log, captureOutput: false)
    }

    var isRunning: Bool { child.isRunning }

    var processIdentifier: Int32 { child.process.processIdentifier }

    /// When the worker was seen to exit; nil while it runs.
    var exitedAt: ContinuousClock.Instant? { child.exitedAt }

    func waitUntilReady(admin: String, timeout: Double) async throws {
        try await waitUntil("the worker to be ready", timeout: .seconds(timeout), longestPause: .milliseconds(20)) {
            guard child.isRunning else {
                throw BenchError(description: "the worker exited with status \(child.process.terminationStatus); see \(child.log)")
            }
            return (try? await httpGet(admin + "/readyz").status) == 200
        }
    }

    /// `VmHWM` of the process: its peak resident set, in MB.
    func peakResidentMegabytes() -> Double { child.peakResidentMegabytes() }

    /// `VmRSS` of the process: its resident set now, in MB.
    func residentMegabytes() -> Double { child.residentMegabytes() }

    /// SIGTERM (an orderly drain), then waits for the exit.
    func stop() { child.stop() }

    /// SIGKILL, then waits for the exit.
    func kill() { child.kill() }

    /// SIGTERM without waiting for the exit.
    func sendTerminate() { child.sendTerminate() }

    /// SIGKILL without waiting for the exit.
    func sendKill() { child.sendKill() }
}

/// A child's standard output as it arrives, shared with the pipe's reading handler.
private final class OutputBuffer: Sendable {
    let bytes = Mutex<[UInt8]>([])
}

/// When a child exited, shared with the process's termination handler.
private final class ExitRecord: Sendable {
    let at = Mutex<ContinuousClock.Instant?>(nil)
}
