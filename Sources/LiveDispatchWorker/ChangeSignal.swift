import Foundation
import LiveDispatchCore
import NIOCore

/// Wakes whoever waits for this process's own state to change, instead of
/// a loop that looks at it every few milliseconds: the code that changes
/// the state calls ``signal()``, and a waiter reads the state again.
///
/// A waiter takes the ``generation`` before it reads the state, and waits
/// for a later one (`wait(after:timeout:)`): a change between its read and
/// its wait ends the wait at once, so none is missed. A wait also ends at
/// its timeout (a machine's next deadline, a shutdown's bound); an async
/// wait ends when its task is cancelled too. The blocking wait
/// (`blockingWait(after:timeout:)`) is for threads that may block, such as
/// librdkafka's poll thread in a revocation handler.
final class ChangeSignal: @unchecked Sendable {
    // @unchecked: every stored property below `condition` is read and
    // written only while `condition` is locked.
    private let condition = NSCondition()
    private let eventLoop: any EventLoop
    private var current: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0

    /// - Parameter eventLoop: where the timeouts of async waits are scheduled.
    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// The number of signals so far.
    var generation: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return current
    }

    /// The state may have changed: every wait under way ends.
    func signal() {
        condition.lock()
        current &+= 1
        let resumed = waiters
        waiters = [:]
        condition.broadcast()
        condition.unlock()
        for continuation in resumed.values { continuation.resume() }
    }

    /// Blocks the calling thread until a signal after `seen`, or until
    /// `timeout` has passed (nil: no timeout).
    func blockingWait(after seen: UInt64, timeout: Duration?) {
        let until = timeout.map { Date(timeIntervalSinceNow: max(0, $0.seconds)) } ?? .distantFuture
        condition.lock()
        defer { condition.unlock() }
        while current == seen {
            if !condition.wait(until: until) { return }
        }
    }

    /// Suspends until a signal after `seen`, until `timeout` has passed (nil:
    /// no timeout), or until the task is cancelled.
    func wait(after seen: UInt64, timeout: Duration?) async {
        let id: UInt64 = {
            condition.lock()
            defer { condition.unlock() }
            nextWaiter &+= 1
            return nextWaiter
        }()
        var timer: Scheduled<Void>?
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                condition.lock()
                // A cancellation before this point found no waiter to end.
                guard current == seen, !Task.isCancelled else {
                    condition.unlock()
                    continuation.resume()
                    return
                }
                waiters[id] = continuation
                condition.unlock()
                if let timeout {
                    timer = eventLoop.scheduleTask(in: .nanoseconds(Self.nanoseconds(timeout))) { [self] in end(id) }
                }
            }
        } onCancel: {
            end(id)
        }
        timer?.cancel()
    }

    private func end(_ id: UInt64) {
        condition.lock()
        let continuation = waiters.removeValue(forKey: id)
        condition.unlock()
        continuation?.resume()
    }

    /// `duration` in whole nanoseconds, rounded up, from 0 to a century.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        guard seconds < 3_153_600_000 else { return 3_153_600_000 * 1_000_000_000 }
        return seconds * 1_000_000_000 + (attoseconds + 999_999_999) / 1_000_000_000
    }
}
