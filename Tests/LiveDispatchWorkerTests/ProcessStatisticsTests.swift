import Foundation
@testable import LiveDispatchWorker
import Testing

@Suite("Process statistics")
struct ProcessStatisticsTests {
    @Test("/proc/<pid>/stat is read from after the command name's last parenthesis")
    func parsesStat() throws {
        let stat = "4242 (live) dispatch)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 360000 1048576000 25600 18446744073709551615 1 1 0 0 0\n"
        let statistics = try #require(ProcessStatistics.parse(stat: stat, ticksPerSecond: 100, pageBytes: 4096, bootTime: 1_764_000_000))
        #expect(statistics.cpuSeconds == 3.0)
        #expect(statistics.startTime == 1_764_003_600)
        #expect(statistics.virtualBytes == 1_048_576_000)
        #expect(statistics.residentBytes == 104_857_600)
        #expect(ProcessStatistics.parse(stat: "4242 (cut short) S 1 2 3", ticksPerSecond: 100, pageBytes: 4096, bootTime: 0) == nil)
        #expect(ProcessStatistics.parse(stat: "no parenthesis at all", ticksPerSecond: 100, pageBytes: 4096, bootTime: 0) == nil)
        #expect(ProcessStatistics.bootTime(fromSystemStat: "cpu  1 2 3\nbtime 1764000000\nprocesses 9\n") == 1_764_000_000)
        #expect(ProcessStatistics.bootTime(fromSystemStat: "cpu  1 2 3\n") == nil)
    }

    @Test("this process: CPU spent, memory resident, descriptors open, started before now")
    func current() throws {
        // Spend some CPU so that the reading cannot be zero.
        var sum = 0.0
        for index in 0..<2_000_000 { sum += sqrt(Double(index)) }
        #expect(sum > 0)
        let statistics = try #require(ProcessStatistics.current())
        #expect(statistics.cpuSeconds > 0)
        #expect(statistics.residentBytes > 1_000_000)
        #expect(statistics.virtualBytes >= statistics.residentBytes)
        #expect((statistics.openFileDescriptors ?? 0) >= 3)
        #expect(statistics.startTime <= Date().timeIntervalSince1970 + 1)
        #expect(statistics.startTime > Date().timeIntervalSince1970 - 24 * 3600)
    }

    @Test("a counter fed readings of a running total adds what grew, never a negative step")
    func reportedTotal() {
        let total = ReportedTotal()
        #expect(total.advance(to: 1.5) == 1.5)
        #expect(total.advance(to: 1.0) == 0)
        #expect(total.advance(to: 2.0) == 0.5)
        #expect(total.advance(to: .nan) == 0)
    }
}
