import Foundation

/// The machine's load averages over 1, 5 and 15 minutes, as `uptime` prints
/// them: a figure measured beside other work says how much there was.
enum LoadAverage {
    /// "1.98 5.46 6.45", or "?" where /proc/loadavg cannot be read.
    static func current() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    }
}
