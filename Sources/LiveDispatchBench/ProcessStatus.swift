import Foundation

/// Size fields of a process's `/proc/PID/status` (Linux).
public enum ProcessStatus {
    /// A size field (`VmHWM:`, `VmRSS:`) of `/proc/PROCESS/status` (`self`
    /// for this process), in MB; nan when unreadable.
    public static func megabytes(_ field: String, process: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8) else { return .nan }
        return megabytes(field, status: status)
    }

    /// A size field of a `/proc/PID/status` text, in MB; nan when absent.
    public static func megabytes(_ field: String, status: String) -> Double {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return .nan }
        return kilobytes / 1024
    }
}
