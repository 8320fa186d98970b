import Foundation
@testable import LiveDispatchWorker
import NIOPosix
import Testing

@Suite("ChangeSignal")
struct ChangeSignalTests {
    let signal = ChangeSignal(eventLoop: MultiThreadedEventLoopGroup.singleton.next())

    @Test("a signal after the generation was taken ends a wait at once, blocking or async: no change is missed")
    func signalBeforeTheWait() async {
        let seen = signal.generation
        signal.signal()
        let started = ContinuousClock.now
        signal.blockingWait(after: seen, timeout: .seconds(60))
        await signal.wait(after: seen, timeout: nil)
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    @Test("a blocking wait ends when another thread signals, long before its timeout")
    func blockingWaitWokenByAnotherThread() {
        let seen = signal.generation
        let started = ContinuousClock.now
        Thread.detachNewThread { [signal] in signal.signal() }
        signal.blockingWait(after: seen, timeout: .seconds(60))
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(signal.generation == seen + 1)
    }

    @Test("an async wait ends when another task signals")
    func asyncWaitWokenByASignal() async {
        let seen = signal.generation
        let waiting = Task { [signal] in await signal.wait(after: seen, timeout: nil) }
        signal.signal()
        await waiting.value
        #expect(signal.generation == seen + 1)
    }

    @Test("with no signal, a wait ends at its timeout, blocking or async")
    func timeout() async {
        let seen = signal.generation
        var started = ContinuousClock.now
        signal.blockingWait(after: seen, timeout: .milliseconds(100))
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        started = ContinuousClock.now
        await signal.wait(after: seen, timeout: .milliseconds(100))
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        #expect(signal.generation == seen)
    }

    @Test("an async wait with no timeout ends when its task is cancelled, also one cancelled before it waits")
    func cancellation() async {
        let seen = signal.generation
        let waiting = Task { [signal] in await signal.wait(after: seen, timeout: nil) }
        waiting.cancel()
        await waiting.value
        let cancelledFirst = Task { [signal] in
            withUnsafeCurrentTask { $0?.cancel() }
            await signal.wait(after: seen, timeout: nil)
        }
        await cancelledFirst.value
        #expect(signal.generation == seen)
    }

    @Test("timeouts in nanoseconds: rounded up, never negative, a century at most")
    func nanoseconds() {
        #expect(ChangeSignal.nanoseconds(.milliseconds(20)) == 20_000_000)
        #expect(ChangeSignal.nanoseconds(.nanoseconds(1) / 2) == 1)
        #expect(ChangeSignal.nanoseconds(.seconds(-3)) == 0)
        #expect(ChangeSignal.nanoseconds(.seconds(Int64.max)) == 3_153_600_000 * 1_000_000_000)
    }
}
