#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The C boundary for the benchmark clock: CPU time of the calling thread.
public enum ThreadCPUTime {
    /// Seconds of CPU the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
    public static func seconds() -> Double {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Seconds of CPU the whole process has used (`CLOCK_PROCESS_CPUTIME_ID`;
    /// its child processes not included).
    public static func processSeconds() -> Double {
        var time = timespec()
        guard clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time) == 0 else { return 0 }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
