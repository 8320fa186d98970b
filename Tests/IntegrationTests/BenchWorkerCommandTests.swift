import Foundation
import Testing

/// `livedispatch bench worker` as a process: a worker with an embedded
/// cluster and simulator, a short run, its figures and its check that the
/// dispatcher took in every command the router wrote.
@Suite("livedispatch bench worker")
struct BenchWorkerCommandTests {
    @Test func aShortRunPrintsItsFiguresAndEveryCommandTakenIn() throws {
        let result = try runProcess(
            ["bench", "worker", "--activities", "20", "--tokens", "2", "--rate", "200", "--seconds", "1"],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("events in: 200 in ") && $0.hasSuffix(" events/s") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("event-to-push latency ms: p50 ") }, "\(result.standardOutput)")
        #expect(lines.contains { $0.hasPrefix("command to push (dispatcher, window included) ms: p50 ") }, "\(result.standardOutput)")
        #expect(lines.contains("commands: 200 routed, 200 taken in by the dispatcher"), "\(result.standardOutput)")
    }
}
