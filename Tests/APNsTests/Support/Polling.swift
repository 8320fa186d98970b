import Foundation
import Synchronization

/// Polls `condition` until it holds or `timeout` seconds pass; returns whether it held.
/// Tests wait this way, never with a fixed sleep.
func eventually(timeout: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        await Task.yield()
        // A short pause between polls; the deadline bounds the wait.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { continuation.resume() }
        }
    }
    return try await condition()
}

/// A counter tasks share.
final class Tally: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    func raise(to value: Int) { count.withLock { $0 = max($0, value) } }
    var value: Int { count.withLock { $0 } }
}
