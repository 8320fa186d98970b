import Foundation
import Synchronization

/// Paths the integration tests need: the repository and the built binary.
enum TestPaths {
    /// The repository root, found from this file's location.
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // Support
        .deletingLastPathComponent()  // IntegrationTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    /// The `livedispatch` executable built beside the test bundle.
    static var livedispatch: URL {
        productsDirectory.appendingPathComponent("livedispatch")
    }

    /// The build products directory (`.build/debug` or wherever `swift test` built).
    static var productsDirectory: URL {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        // On Linux the tests run from `<products>/LiveDispatchPackageTests.xctest`.
        while directory.path != "/" {
            if FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("livedispatch").path) {
                return directory
            }
            directory = directory.deletingLastPathComponent()
        }
        return executable.deletingLastPathComponent()
    }

    /// A fresh temporary directory for one test.
    static func temporaryDirectory(_ name: String = "livedispatch-test") throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// What a finished process left behind.
struct ProcessResult: Sendable {
    var status: Int32
    var standardOutput: String
    var standardError: String
}

/// A process for `executable` with `environment` added to this one's.
func makeProcess(_ arguments: [String], executable: URL, environment: [String: String], currentDirectory: URL?) -> Process {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    }
    return process
}

/// Runs `livedispatch` (or another executable) to completion and captures its output.
func runProcess(
    _ arguments: [String], executable: URL = TestPaths.livedispatch, standardInput: String? = nil,
    currentDirectory: URL? = nil, environment: [String: String] = [:]
) throws -> ProcessResult {
    let process = makeProcess(arguments, executable: executable, environment: environment, currentDirectory: currentDirectory)
    let output = Pipe()
    let errors = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input
    try process.run()
    if let standardInput { input.fileHandleForWriting.write(Data(standardInput.utf8)) }
    try input.fileHandleForWriting.close()
    // Drain both pipes concurrently so a chatty process cannot block on a full pipe.
    let errorData = Mutex(Data())
    let errorsDone = DispatchSemaphore(value: 0)
    let errorReader = Thread {
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        errorData.withLock { $0 = data }
        errorsDone.signal()
    }
    errorReader.start()
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    errorsDone.wait()
    return ProcessResult(
        status: process.terminationStatus,
        standardOutput: String(decoding: outputData, as: UTF8.self),
        standardError: String(decoding: errorData.withLock { $0 }, as: UTF8.self))
}

/// A long-running child process (an embedded Kafka cluster, the APNs
/// simulator, a worker) whose output lines are collected as they come, so a
/// test can wait for a line with a deadline. Terminated when stopped or
/// released.
final class BackgroundProcess: Sendable {
    private let process: Process
    private let lines = LineBuffer()
    private let errorLines = LineBuffer()

    init(
        _ arguments: [String], executable: URL = TestPaths.livedispatch, environment: [String: String] = [:],
        currentDirectory: URL? = nil
    ) throws {
        let process = makeProcess(arguments, executable: executable, environment: environment, currentDirectory: currentDirectory)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        self.process = process
        Self.collect(output.fileHandleForReading, into: lines)
        Self.collect(errors.fileHandleForReading, into: errorLines)
        try process.run()
    }

    private static func collect(_ handle: FileHandle, into sink: LineBuffer) {
        let thread = Thread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    sink.append(line)
                }
            }
            if !pending.isEmpty {
                let line = String(decoding: pending, as: UTF8.self)
                sink.append(line)
            }
        }
        thread.start()
    }

    var processIdentifier: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var standardOutputLines: [String] { lines.snapshot }
    var standardErrorLines: [String] { errorLines.snapshot }

    /// Waits until a standard output line satisfies `predicate` and returns it.
    func waitForLine(
        timeout: Duration = .seconds(60), where predicate: @Sendable (String) -> Bool
    ) async throws -> String {
        try await waitFor("an output line", timeout: timeout) {
            self.standardOutputLines.first(where: predicate)
        }
    }

    /// Sends SIGTERM (or `signal`) and waits for the process to exit.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(30)) async throws -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        try await waitFor("process \(process.processIdentifier) to exit", timeout: timeout) {
            self.process.isRunning ? nil : true
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Lines of a process's output, appended by a reader thread.
final class LineBuffer: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    var snapshot: [String] { lines.withLock { $0 } }
}

/// A condition that did not hold before its deadline.
struct WaitTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` until it returns a value or `timeout` passes. Polling
/// backs off from 5 ms to 100 ms; it never waits a fixed time for an outcome.
func waitFor<T>(
    _ what: String, timeout: Duration = .seconds(60), condition: () async throws -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    var interval = Duration.milliseconds(5)
    while true {
        if let value = try await condition() { return value }
        if clock.now >= deadline { throw WaitTimeout(what: what) }
        await pollPause(interval)
        interval = min(interval * 2, .milliseconds(100))
    }
}

/// The pause between two polls of a condition.
private func pollPause(_ interval: Duration) async {
    let nanoseconds = interval.components.attoseconds / 1_000_000_000 + interval.components.seconds * 1_000_000_000
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
            continuation.resume()
        }
    }
}
