import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs recursive work (compiling rule files) on a thread with a stack large
/// enough for it, and waits until that thread has ended: the caller may be
/// a thread with a small stack, as secondary and concurrency pool threads
/// are.
enum LargeStack {
    static let stackBytes = 16 << 20

    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = ResultBox<T>()
        let job = Job {
            let value = body()
            result.value.withLock { $0 = value }
        }
        runOnThread(job)
        // The thread stored its value before it ended; should it not have
        // (no thread could be made), doing the work here is still correct.
        guard let value = result.value.withLock({ $0 }) else { return body() }
        return value
    }

    private final class ResultBox<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
    }

    private final class Job: Sendable {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }

    #if canImport(Glibc)
    /// A joined pthread: when this returns the thread has ended, so nothing
    /// of the work is still being torn down on it.
    private static func runOnThread(_ job: Job) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackBytes)
        let context = Unmanaged.passRetained(job).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            Unmanaged<Job>.fromOpaque(context).takeRetainedValue().work()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<Job>.fromOpaque(context).release()
            return
        }
        pthread_join(thread, nil)
    }
    #else
    private static func runOnThread(_ job: Job) {
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            job.work()
            done.signal()
        }
        thread.stackSize = stackBytes
        thread.start()
        done.wait()
    }
    #endif
}
