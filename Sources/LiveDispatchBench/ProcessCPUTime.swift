import Foundation

/// The CPU time a process has used, from its `/proc/PID/stat` (Linux): user
/// and system time, in clock ticks.
public struct ProcessCPUTime: Sendable, Equatable {
    public var ticks: UInt64

    public init(ticks: UInt64) { self.ticks = ticks }

    /// Parses a `/proc/PID/stat` text; nil when it has no utime (field 14)
    /// and stime (field 15). The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself, so fields are counted from
    /// after its last `)`, where field 3 (the state) begins.
    public init?(procStat text: String) {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(whereSeparator: { $0 == " " || $0 == "\n" })
        // fields[0] is field 3: field n is fields[n - 3].
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        let (sum, overflow) = user.addingReportingOverflow(system)
        guard !overflow else { return nil }
        ticks = sum
    }

    /// The process's CPU time now; nil once it is gone (or without `/proc`).
    public static func of(pid: Int32) -> ProcessCPUTime? {
        (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)).flatMap(ProcessCPUTime.init(procStat:))
    }

    /// Clock ticks per second (`_SC_CLK_TCK`, 100 on Linux).
    public static let ticksPerSecond: Double = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))

    /// The share of one core, in percent, the process used from `earlier`
    /// to this reading over `seconds` of wall-clock time; nil when no time
    /// passed or the counter went back (another process with the same pid).
    public func percentOfACore(since earlier: ProcessCPUTime, seconds: Double, ticksPerSecond: Double = ProcessCPUTime.ticksPerSecond) -> Double? {
        guard seconds > 0, ticks >= earlier.ticks, ticksPerSecond > 0 else { return nil }
        return Double(ticks - earlier.ticks) / ticksPerSecond / seconds * 100
    }
}
