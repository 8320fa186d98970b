import Foundation

/// The machine's CPU time since boot, from the first line of `/proc/stat`
/// (Linux): every core's busy and idle time added up, in clock ticks.
public struct MachineCPU: Sendable, Equatable {
    public var busy: UInt64
    public var total: UInt64

    /// Parses `/proc/stat`'s text; nil when its first line is not the
    /// machine's `cpu` line of at least four numbers.
    public init?(procStat text: String) {
        guard let line = text.split(separator: "\n", maxSplits: 1).first else { return nil }
        let fields = line.split(separator: " ")
        guard fields.first == "cpu" else { return nil }
        let ticks = fields.dropFirst().map { UInt64($0) }
        // user nice system idle iowait irq softirq steal (guest time is counted in user already).
        guard ticks.count >= 4, ticks.allSatisfy({ $0 != nil }) else { return nil }
        let values = ticks.prefix(8).compactMap { $0 }
        let (sum, overflow) = values.reduce((UInt64(0), false)) { partial, value in
            let next = partial.0.addingReportingOverflow(value)
            return (next.partialValue, partial.1 || next.overflow)
        }
        guard !overflow else { return nil }
        let idle = values[3] + (values.count > 4 ? values[4] : 0)
        busy = sum - idle
        total = sum
    }

    /// The machine's CPU time now; nil where `/proc/stat` cannot be read.
    public static func now() -> MachineCPU? {
        (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)).flatMap(MachineCPU.init(procStat:))
    }

    /// The share of the machine's CPU time (0 to 1, all cores) that was busy
    /// from `earlier` until this reading; nil when no time passed between them.
    public func busyShare(since earlier: MachineCPU) -> Double? {
        guard total > earlier.total, busy >= earlier.busy else { return nil }
        return Double(busy - earlier.busy) / Double(total - earlier.total)
    }
}
