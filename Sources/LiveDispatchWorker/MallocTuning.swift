#if canImport(CMalloc)
import CMalloc
#endif

/// How the worker asks glibc's malloc to give memory back.
///
/// Sends, HTTP/2 requests and fetched records are allocated and freed on
/// several threads in bursts (a fan-out, a restore). With glibc's defaults
/// each thread may get its own arena (up to eight per core), each keeping
/// its freed memory, and the threshold above which a block is its own
/// mapping rises with every large block freed, so the token tables' large
/// arrays end up inside the heap, where freeing them returns nothing.
/// The worker fixes both at start: two arenas, blocks of 128 KiB and more
/// mapped on their own, the heap's top trimmed above 256 KiB free, and it
/// hands free pages back once a restore is done (``releaseFreeMemory()``).
/// An operator's `MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_` or
/// `MALLOC_TRIM_THRESHOLD_` wins over each. (BENCHMARKS.md, "Fan-out".)
public enum MallocTuning {
    private static let arenas: Int32 = 2
    private static let mmapThresholdBytes: Int32 = 128 * 1024
    private static let trimThresholdBytes: Int32 = 256 * 1024

    /// Applies the settings the environment does not set itself; call it
    /// first thing, before threads allocate.
    public static func apply(environment: [String: String]) {
        #if canImport(CMalloc)
        if environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(M_ARENA_MAX, arenas) }
        if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = mallopt(M_MMAP_THRESHOLD, mmapThresholdBytes) }
        if environment["MALLOC_TRIM_THRESHOLD_"] == nil { _ = mallopt(M_TRIM_THRESHOLD, trimThresholdBytes) }
        #endif
    }

    /// Returns the free pages of every arena to the system.
    public static func releaseFreeMemory() {
        #if canImport(CMalloc)
        _ = malloc_trim(0)
        #endif
    }
}
