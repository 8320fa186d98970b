import Foundation
import Testing

/// `livedispatch-bench faults` as a process: a reduced scenario under a few
/// fast faults, each against its own embedded Kafka process, simulator
/// process and two worker processes.
@Suite("livedispatch-bench faults")
struct BenchFaultsCommandTests {
    @Test func everyTokenReachesItsFinalStateAndNoneGetsAnOlderStateAfterANewerOne() throws {
        let faults = ["baseline", "apns-500", "goaway", "kafka-errors", "poison"]
        let result = try runBench(
            [
                "faults", "--faults", faults.joined(separator: ","), "--activities", "10", "--tokens", "4",
                "--bursts", "3", "--goals", "2", "--interval", "0.5", "--partitions", "3", "--drain-timeout", "60",
            ],
            currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let rows = result.standardOutput.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(rows.contains { $0.first == "fault" && $0.contains("older>newer") })
        for fault in faults {
            let row = try #require(rows.first { $0.first.map(String.init) == fault }, "no row for \(fault):\n\(result.standardOutput)")
            // fault, final, at final, unrecorded, older>newer, …
            #expect(row.count >= 5)
            if fault != "apns-500" {
                // 30 % of 500s can, rarely, exhaust a push's retries: that row
                // may then end short, but only with a dead letter saying so.
                #expect(row[1] == "yes", "\(fault): \(row.joined(separator: " "))")
                #expect(row[2] == "40/40", "\(fault): \(row.joined(separator: " "))")
            }
            #expect(row[3] == "0", "\(fault): tokens short without a dead letter: \(row.joined(separator: " "))")
            #expect(row[4] == "0", "\(fault): older after newer: \(row.joined(separator: " "))")
        }
        let poison = try #require(rows.first { $0.first == "poison" }).joined(separator: " ")
        // 10 activities, one burst with 3 undecodable events, a rule's type error and a bad command each.
        #expect(poison.contains("invalid-json=30"), "\(poison)")
        #expect(poison.contains("rule-error=10"), "\(poison)")
        #expect(poison.contains("invalid-command=10"), "\(poison)")
    }

    @Test func anUnknownFaultIsRefusedNamingTheKnownOnes() throws {
        let result = try runBench(["faults", "--faults", "baseline,meteor"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("unknown fault 'meteor'"))
        #expect(result.standardError.contains("kill-9"))
    }
}
