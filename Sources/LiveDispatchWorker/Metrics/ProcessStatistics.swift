import Foundation

/// What Prometheus's `process_*` series say of a process, read from Linux's
/// `/proc`: CPU time, memory, file descriptors and start time.
public struct ProcessStatistics: Sendable, Hashable {
    /// User and system CPU time, in seconds.
    public var cpuSeconds: Double
    public var residentBytes: Double
    public var virtualBytes: Double
    /// Unix time the process started, in seconds.
    public var startTime: Double
    public var openFileDescriptors: Int?
    public var maxFileDescriptors: Int?

    /// The calling process now; nil where `/proc` cannot be read (not Linux).
    public static func current() -> ProcessStatistics? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let bootTime = systemBootTime else { return nil }
        let ticks = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))
        let pageBytes = Double(max(1, sysconf(Int32(_SC_PAGESIZE))))
        guard var statistics = parse(stat: stat, ticksPerSecond: ticks, pageBytes: pageBytes, bootTime: bootTime) else { return nil }
        statistics.openFileDescriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            statistics.maxFileDescriptors = limit.rlim_cur == rlim_t.max ? nil : Int(exactly: limit.rlim_cur)
        }
        return statistics
    }

    /// Reads `/proc/<pid>/stat`. The command name (field 2) is in parentheses
    /// and may itself hold spaces and parentheses, so the fields are counted
    /// from after its last `)`: state is field 3, utime 14, stime 15,
    /// starttime 22 (ticks after boot), vsize 23 (bytes), rss 24 (pages).
    static func parse(stat: String, ticksPerSecond: Double, pageBytes: Double, bootTime: Double) -> ProcessStatistics? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? {
            let index = number - 3
            guard fields.indices.contains(index) else { return nil }
            return Double(fields[index].trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard let user = field(14), let system = field(15), let started = field(22), let virtual = field(23), let pages = field(24) else {
            return nil
        }
        return ProcessStatistics(
            cpuSeconds: (user + system) / ticksPerSecond, residentBytes: pages * pageBytes, virtualBytes: virtual,
            startTime: bootTime + started / ticksPerSecond, openFileDescriptors: nil, maxFileDescriptors: nil)
    }

    /// When the system booted, read once: it does not change while the process runs.
    private static let systemBootTime: Double? = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)).flatMap(bootTime(fromSystemStat:))

    /// The `btime` line of `/proc/stat`: when the system booted, in Unix seconds.
    static func bootTime(fromSystemStat text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
