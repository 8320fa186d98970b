import Foundation
import Testing

/// `livedispatch-bench worker` as a process: a worker with an embedded
/// cluster and simulator, a short run, its figures and its check that the
/// dispatcher took in every command the router wrote.
@Suite("livedispatch-bench worker")
struct BenchWorkerCommandTests {
    @Test func aShortRunPrintsItsFiguresAndEveryCommandTakenIn() throws {
        let result = try runBench(
            ["worker", "--activities", "20", "--tokens", "2", "--rate", "200", "--seconds", "1"],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("events in: 200 in ") && $0.hasSuffix(" events/s") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("event-to-push latency ms: p50 ") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("command to push (dispatcher, window included) ms: p50 ") }, "\(result.standardOutput)")
        #expect(lines.contains("commands: 200 routed, 200 taken in by the dispatcher"), "\(result.standardOutput)")
        // The timelines count every command routed and every push received.
        #expect(Self.sum(after: "commands routed per second: ", in: lines) == 200, "\(result.standardOutput)")
        let pushes = lines.first { $0.hasPrefix("pushes out: ") }.flatMap { Int($0.dropFirst("pushes out: ".count).prefix { $0 != ":" }) }
        #expect(pushes != nil && Self.sum(after: "pushes received per second: ", in: lines) == pushes, "\(result.standardOutput)")
    }

    /// The sum of the numbers on the line that starts with `prefix`.
    static func sum(after prefix: String, in lines: [String]) -> Int? {
        guard let line = lines.first(where: { $0.hasPrefix(prefix) }) else { return nil }
        let numbers = line.dropFirst(prefix.count).split(separator: " ").map { Int($0) }
        guard !numbers.contains(nil) else { return nil }
        return numbers.reduce(0) { $0 + ($1 ?? 0) }
    }
}

/// `livedispatch-bench dispatch` as a process: the partition machine on its
/// own clock, so its push count is exact.
@Suite("livedispatch-bench dispatch")
struct BenchDispatchCommandTests {
    @Test func commandsInsideOneWindowMakeOnePushPerActivity() throws {
        // 10 activities, a command every millisecond: each activity gets one
        // every 10 ms for 0.2 s, so its window slides until the run ends and
        // it is pushed once, with one snapshot.
        let result = try runBench(
            ["dispatch", "--activities", "10", "--commands", "200", "--rate", "1000"],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains("pushes: 10 (20.0 command-token pairs per push), snapshots: 10"), "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("intake: ") && $0.hasSuffix(" µs CPU per command (parse, merge, payload check)") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("push: ") && $0.hasSuffix(" µs CPU per push (flush, payload, send, completion, snapshot)") }, "\(result.standardOutput)")
    }

    @Test func spacedCommandsArePushedOneByOne() throws {
        // 100 activities at 100 commands/s: each gets one a second, past its
        // window, so every command is a push of its own.
        let result = try runBench(
            ["dispatch", "--activities", "100", "--commands", "300", "--rate", "100", "--tokens", "2"],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains("pushes: 600 (1.0 command-token pairs per push), snapshots: 300"), "\(result.standardOutput)")
    }
}

/// `livedispatch-bench soak` as a process, briefly: its worker is a process
/// of its own, and what that process spends comes from its `/metrics`.
@Suite("bench soak")
struct BenchSoakCommandTests {
    @Test func reportsWhatTheWorkerTookAndItsCPU() throws {
        let result = try runBench(
            ["soak", "--minutes", "0.4", "--rate", "400", "--activities", "40", "--sample-seconds", "2",
             "--warm-up-seconds", "8", "--tolerance", "100", "--partitions", "2"],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let dispatched = lines.first { $0.hasPrefix("worker after warm-up: ") }
        #expect(dispatched != nil, "\(result.standardOutput)")
        let cpu = try #require(lines.first { $0.hasPrefix("worker CPU after warm-up: ") }, "\(result.standardOutput)")
        // "worker CPU after warm-up: C cores"
        let cores = try #require(cpu.split(separator: " ").dropFirst(4).first.flatMap { Double($0) }, "\(cpu)")
        #expect(cores > 0 && cores < 8, "\(cpu)")
        #expect(lines.contains { $0.contains(" cpu ") && $0.contains(" rss ") }, "every sample shows the worker's CPU so far")
        #expect(lines.contains { $0.contains("  routing paused no  ") || $0.contains("  routing paused yes  ") }, "and whether its routing waits")
    }
}

/// Runs `livedispatch-bench` to completion and captures its output.
func runBench(_ arguments: [String], currentDirectory: URL? = nil, environment: [String: String] = [:]) throws -> ProcessResult {
    try runProcess(arguments, executable: TestPaths.livedispatchBench, currentDirectory: currentDirectory, environment: environment)
}
