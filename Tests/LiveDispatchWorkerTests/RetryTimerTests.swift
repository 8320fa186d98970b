import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import LiveDispatchWorker

@Suite("RetryTimer")
struct RetryTimerTests {
    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    @Test("jobs run when their delay has passed, earliest first, on one timer")
    func earliestFirst() {
        let loop = EmbeddedEventLoop()
        let timer = RetryTimer(eventLoop: loop)
        let log = Log()
        timer.schedule(after: 6.4) { log.append("late") }
        timer.schedule(after: 0.4) { log.append("soon") }
        timer.schedule(after: 1.6) { log.append("middle") }
        #expect(timer.count == 3)
        loop.advanceTime(by: .milliseconds(399))
        #expect(log.all == [])
        loop.advanceTime(by: .milliseconds(1))
        #expect(log.all == ["soon"])
        // Deadlines are seconds as Double: a timer may fire a nanosecond late.
        loop.advanceTime(by: .milliseconds(1_199))
        #expect(log.all == ["soon"])
        loop.advanceTime(by: .milliseconds(2))
        #expect(log.all == ["soon", "middle"])
        loop.advanceTime(by: .seconds(5))
        #expect(log.all == ["soon", "middle", "late"])
        #expect(timer.count == 0)
    }

    @Test("a job scheduled from a job runs after its own delay")
    func rescheduledFromAJob() {
        let loop = EmbeddedEventLoop()
        let timer = RetryTimer(eventLoop: loop)
        let log = Log()
        timer.schedule(after: 1) {
            log.append("first")
            timer.schedule(after: 2) { log.append("second") }
        }
        loop.advanceTime(by: .seconds(1))
        #expect(log.all == ["first"])
        loop.advanceTime(by: .milliseconds(1_999))
        #expect(log.all == ["first"])
        loop.advanceTime(by: .milliseconds(2))
        #expect(log.all == ["first", "second"])
    }

    @Test("stopping drops the jobs waiting and refuses new ones")
    func stop() {
        let loop = EmbeddedEventLoop()
        let timer = RetryTimer(eventLoop: loop)
        let log = Log()
        timer.schedule(after: 1) { log.append("dropped") }
        timer.stop()
        timer.schedule(after: 1) { log.append("refused") }
        loop.advanceTime(by: .seconds(10))
        #expect(log.all == [])
        #expect(timer.count == 0)
    }
}
