import Foundation

/// Runs blocking work (librdkafka calls that wait on the network) on a thread
/// of its own, never on Swift's cooperative pool.
enum DedicatedThread {
    /// Starts `body` on a new thread.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.name = name
        thread.start()
    }

    /// Runs `body` on a new thread and returns its result.
    static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            start(name: name) { continuation.resume(returning: body()) }
        }
    }
}
