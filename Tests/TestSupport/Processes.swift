import Foundation
import Synchronization

/// Paths the integration tests need: the repository and the built binary.
public enum TestPaths {
    /// The repository root, found from this file's location.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // TestSupport
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    /// The `livedispatch` executable built beside the test bundle.
    public static var livedispatch: URL {
        productsDirectory.appendingPathComponent("livedispatch")
    }

    /// The `livedispatch-bench` executable built beside it.
    public static var livedispatchBench: URL {
        productsDirectory.appendingPathComponent("livedispatch-bench")
    }

    /// The build products directory (`.build/debug` or wherever `swift test` built).
    public static var productsDirectory: URL {
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
    public static func temporaryDirectory(_ name: String = "livedispatch-test") throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// What a finished process left behind.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var standardOutput: String
    public var standardError: String

    public init(status: Int32, standardOutput: String, standardError: String) {
        self.status = status
        self.standardOutput = standardOutput
        self.standardError = standardError
    }
}

/// A process for `executable` with `environment` added to this one's.
public func makeProcess(_ arguments: [String], executable: URL, environment: [String: String], currentDirectory: URL?) -> Process {
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
public func runProcess(
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
public final class BackgroundProcess: Sendable {
    private let process: Process
    private let lines = LineBuffer()
    private let errorLines = LineBuffer()

    public init(
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
            sink.finish()
        }
        thread.start()
    }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var standardOutputLines: [String] { lines.snapshot }
    public var standardErrorLines: [String] { errorLines.snapshot }

    /// Waits until a standard output line satisfies `predicate` and returns it.
    public func waitForLine(
        timeout: Duration = .seconds(60), where predicate: @Sendable (String) -> Bool
    ) async throws -> String {
        try await waitFor("an output line", timeout: timeout) {
            self.standardOutputLines.first(where: predicate)
        }
    }

    /// Sends SIGTERM (or `signal`) and waits for the process to exit and
    /// (for up to 5 s) for its last output lines to be read.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(30)) async throws -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        try await waitFor("process \(process.processIdentifier) to exit", timeout: timeout) {
            self.process.isRunning ? nil : true
        }
        // A child that inherited the pipes may hold them open: then the lines
        // read so far are what a failure message shows.
        _ = try? await waitFor("process \(process.processIdentifier)'s output to end", timeout: .seconds(5)) {
            self.lines.isFinished && self.errorLines.isFinished ? true : nil
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Lines of a process's output, appended by a reader thread.
public final class LineBuffer: Sendable {
    private let lines = Mutex<[String]>([])
    private let finished = Mutex(false)

    public init() {}

    public func append(_ line: String) { lines.withLock { $0.append(line) } }

    /// Marks the end of the output: no line follows.
    public func finish() { finished.withLock { $0 = true } }

    public var snapshot: [String] { lines.withLock { $0 } }

    /// Whether the output ended (the writer closed its end).
    public var isFinished: Bool { finished.withLock { $0 } }
}
