import Foundation
import Testing

/// `livedispatch-bench idle` as a process, briefly: two idle workers
/// against an embedded cluster process, whose pid it knows.
@Suite("livedispatch-bench idle")
struct BenchIdleCommandTests {
    @Test func idleWorkersLongPollByDefault() throws {
        let result = try runBench(["idle", "--workers", "2", "--partitions", "2", "--seconds", "2"], currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").first { $0.hasPrefix("idle: 2 workers, worker CPU ") }, "\(result.standardOutput)")
        #expect(line.contains(" % of a core, broker CPU ") && line.contains(" % (pid "), "\(line)")
        // With librdkafka's 500 ms wait each consumer asks about twice a
        // second, beside a heartbeat a second per group member; a 10 ms
        // wait makes it hundreds.
        let rate = try #require(line.split(separator: " ").last.flatMap { Double($0.dropLast(2)) }, "\(line)")
        #expect(rate > 0 && rate < 100, "\(line)")
        #expect(result.standardOutput.contains("fetch.wait.max.ms default; 2 partitions; broker embedded; load average "), "\(result.standardOutput)")
    }

    @Test func aShortFetchWaitIsPassedToTheWorkers() throws {
        let result = try runBench(
            ["idle", "--workers", "1", "--partitions", "2", "--seconds", "2", "--fetch-wait-ms", "10"], currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").first { $0.hasPrefix("idle: 1 worker, ") }, "\(result.standardOutput)")
        let rate = try #require(line.split(separator: " ").last.flatMap { Double($0.dropLast(2)) }, "\(line)")
        #expect(rate > 100, "\(line)")
    }
}
