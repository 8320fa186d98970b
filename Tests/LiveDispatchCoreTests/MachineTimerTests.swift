import LiveDispatchCore
import Testing

@Suite("Machine timer")
struct MachineTimerTests {
    /// Records what the timer asked to schedule; handles are the schedule calls' indices.
    private struct Scheduler {
        var scheduled: [(delay: Duration, number: UInt64)] = []

        mutating func arm(_ timer: inout MachineTimer<Int>, at next: Double?, now: Double) -> Int? {
            timer.arm(at: next.map { UnixTime(seconds: $0) }, now: UnixTime(seconds: now)) { delay, number in
                scheduled.append((delay, number))
                return scheduled.count - 1
            }
        }
    }

    @Test("a first deadline arms a timer for the wait until it, numbered 1")
    func armsTheFirstDeadline() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        let replaced = scheduler.arm(&timer, at: 1_000.25, now: 1_000)
        #expect(replaced == nil)
        #expect(scheduler.scheduled.map(\.delay) == [.milliseconds(250)])
        #expect(scheduler.scheduled.map(\.number) == [1])
        #expect(timer.armed?.at == UnixTime(seconds: 1_000.25))
        #expect(timer.armed?.handle == 0)
    }

    @Test("an earlier deadline arms a new timer and hands back the replaced one to cancel")
    func earlierDeadlineReplaces() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        _ = scheduler.arm(&timer, at: 20, now: 0)
        let replaced = scheduler.arm(&timer, at: 5, now: 1)
        #expect(replaced == 0)
        #expect(scheduler.scheduled.map(\.delay) == [.seconds(20), .seconds(4)])
        #expect(timer.armed?.number == 2)
        #expect(timer.armed?.at == UnixTime(seconds: 5))
    }

    @Test("the same deadline or a later one leaves the armed timer; it fires early and the next is armed then")
    func laterDeadlineLeavesTheArmedTimer() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        _ = scheduler.arm(&timer, at: 10, now: 0)
        var replaced = scheduler.arm(&timer, at: 10, now: 1)
        #expect(replaced == nil)
        replaced = scheduler.arm(&timer, at: 30, now: 2)
        #expect(replaced == nil)
        #expect(scheduler.scheduled.count == 1)
        let isCurrent = timer.fired(1)
        #expect(isCurrent)
        replaced = scheduler.arm(&timer, at: 30, now: 10)
        #expect(replaced == nil)
        #expect(scheduler.scheduled.map(\.delay) == [.seconds(10), .seconds(20)])
        #expect(timer.armed?.number == 2)
    }

    @Test("no deadline hands back the armed timer to cancel, and an idle machine keeps none")
    func noDeadlineDisarms() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        var replaced = scheduler.arm(&timer, at: nil, now: 0)
        #expect(replaced == nil)
        _ = scheduler.arm(&timer, at: 10, now: 0)
        replaced = scheduler.arm(&timer, at: nil, now: 1)
        #expect(replaced == 0)
        #expect(timer.armed == nil)
        replaced = scheduler.arm(&timer, at: nil, now: 2)
        #expect(replaced == nil)
        #expect(scheduler.scheduled.count == 1)
    }

    @Test("a fired timer is spent: the same deadline is armed again when the machine's clock says it is still ahead")
    func firedTimerRearmsTheSameDeadline() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        _ = scheduler.arm(&timer, at: 100, now: 99)
        // The event loop's clock ran ahead of the machine's wall clock:
        // the machine finds nothing due at 99.5 and its deadline stays 100.
        let isCurrent = timer.fired(1)
        #expect(isCurrent)
        #expect(timer.armed == nil)
        let replaced = scheduler.arm(&timer, at: 100, now: 99.5)
        #expect(replaced == nil)
        #expect(scheduler.scheduled.map(\.delay) == [.seconds(1), .milliseconds(500)])
        #expect(timer.armed?.number == 2)
    }

    @Test("a replaced timer that ran anyway is stale and leaves the armed one alone")
    func staleFiringIsIgnored() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        _ = scheduler.arm(&timer, at: 20, now: 0)
        _ = scheduler.arm(&timer, at: 10, now: 0)
        var isCurrent = timer.fired(1)
        #expect(!isCurrent)
        #expect(timer.armed?.number == 2)
        isCurrent = timer.fired(2)
        #expect(isCurrent)
        isCurrent = timer.fired(2)
        #expect(!isCurrent)
        #expect(timer.armed == nil)
    }

    @Test("disarm hands back the armed timer once; a later firing of it is stale")
    func disarm() {
        var timer = MachineTimer<Int>()
        var scheduler = Scheduler()
        var cancelled = timer.disarm()
        #expect(cancelled == nil)
        _ = scheduler.arm(&timer, at: 5, now: 0)
        cancelled = timer.disarm()
        #expect(cancelled == 0)
        cancelled = timer.disarm()
        #expect(cancelled == nil)
        let isCurrent = timer.fired(1)
        #expect(!isCurrent)
    }

    @Test("a past, unbounded or not-a-number deadline gives a delay that cannot trap", arguments: [
        (-5.0, Duration.zero), (Double.nan, .zero), (1e300, MachineTimer<Int>.longestDelay), (Double.infinity, MachineTimer<Int>.longestDelay),
        (0.000_000_000_4, .nanoseconds(1)),
    ])
    func delayIsTotal(deadline: Double, expected: Duration) {
        #expect(MachineTimer<Int>.delay(from: UnixTime(seconds: 0), to: UnixTime(seconds: deadline)) == expected)
    }
}
