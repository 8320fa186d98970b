import Foundation
import Synchronization

/// Runs recursive work (compiling rule files) on a thread with a stack large
/// enough for it, and waits for it: the caller may be a thread with a small
/// stack, as secondary and concurrency pool threads are.
enum LargeStack {
    static let stackBytes = 16 << 20

    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Result<T>()
        let thread = Thread {
            let value = body()
            result.value.withLock { $0 = value }
            result.done.signal()
        }
        thread.stackSize = stackBytes
        thread.start()
        result.done.wait()
        // The thread stored its value before it signalled; should it not
        // have, doing the work here is still correct.
        guard let value = result.value.withLock({ $0 }) else { return body() }
        return value
    }

    private final class Result<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
    }
}
