import LiveDispatchCore
import NIOCore
import Synchronization

/// Work waiting out its backoff: a ``DeadlineQueue`` and one timer armed at
/// its next deadline, so a thousand refused writes take one timer, not a
/// sleeping task each. Jobs run on the event loop, earliest first; once
/// stopped, pending jobs are dropped and new ones refused.
final class RetryTimer: Sendable {
    typealias Job = @Sendable () -> Void

    private struct State {
        var queue = DeadlineQueue<UInt64>.ordered
        var jobs: [UInt64: Job] = [:]
        var nextJob: UInt64 = 0
        var armed: (at: UnixTime, timer: Scheduled<Void>, number: UInt64)?
        var timersArmed: UInt64 = 0
        var isStopped = false
    }

    private let state = Mutex(State())
    private let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Jobs waiting.
    var count: Int { state.withLock { $0.jobs.count } }

    /// Runs `job` once `delay` seconds have passed, unless stopped first.
    func schedule(after delay: Double, _ job: @escaping Job) {
        let replaced: Scheduled<Void>? = state.withLock { state in
            guard !state.isStopped else { return nil }
            let now = self.now
            let id = state.nextJob
            state.nextJob &+= 1
            state.jobs[id] = job
            state.queue.schedule(id, at: now + max(0, delay))
            return rearm(&state, now: now)
        }
        replaced?.cancel()
    }

    /// Drops the jobs waiting and refuses new ones.
    func stop() {
        let armed: Scheduled<Void>? = state.withLock { state in
            state.isStopped = true
            state.jobs.removeAll()
            state.queue = DeadlineQueue<UInt64>.ordered
            defer { state.armed = nil }
            return state.armed?.timer
        }
        armed?.cancel()
    }

    /// The event loop's clock, as seconds in a ``UnixTime`` (only differences matter).
    private var now: UnixTime { UnixTime(seconds: Double(eventLoop.now.uptimeNanoseconds) / 1e9) }

    /// Arms the timer at the next deadline when none is armed or the next
    /// one is earlier; returns the timer it replaced.
    private func rearm(_ state: inout State, now: UnixTime) -> Scheduled<Void>? {
        guard !state.isStopped, let next = state.queue.next else { return nil }
        if let armed = state.armed, armed.at <= next { return nil }
        let replaced = state.armed?.timer
        let nanoseconds = Int64(exactly: (max(0, next - now) * 1e9).rounded(.up)) ?? Int64.max / 2
        state.timersArmed &+= 1
        let number = state.timersArmed
        let timer = eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { [weak self] () -> Void in self?.fired(number) }
        state.armed = (next, timer, number)
        return replaced
    }

    /// Runs the jobs due and arms the next deadline. A replaced timer that
    /// ran anyway leaves the armed one alone.
    private func fired(_ number: UInt64) {
        let due: [Job] = state.withLock { state in
            guard state.armed?.number == number else { return [] }
            state.armed = nil
            let now = self.now
            let jobs = state.queue.popDue(now: now).compactMap { state.jobs.removeValue(forKey: $0) }
            _ = rearm(&state, now: now)
            return jobs
        }
        for job in due { job() }
    }
}
