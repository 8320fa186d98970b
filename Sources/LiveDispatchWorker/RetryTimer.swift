import APNs
import LiveDispatchCore
import NIOCore
import Synchronization

/// Work waiting out its backoff: a ``DeadlineQueue`` and one timer armed at
/// its next deadline, so a thousand refused writes take one timer, not a
/// sleeping task each. Jobs run on the event loop, earliest first; once
/// stopped, pending jobs are dropped and new ones refused. Its time is the
/// event loop's uptime: its deadlines are delays, from no record.
final class RetryTimer: Sendable {
    typealias Job = @Sendable () -> Void

    private struct State {
        var queue = DeadlineQueue<UInt64>.ordered
        var jobs: [UInt64: Job] = [:]
        var nextJob: UInt64 = 0
        var timer = MachineTimer<Scheduled<Void>>()
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
            let now = eventLoop.uptime
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
            return state.timer.disarm()
        }
        armed?.cancel()
    }

    /// Arms the timer at the next deadline (see ``MachineTimer`` for when);
    /// returns the timer it replaced.
    private func rearm(_ state: inout State, now: UnixTime) -> Scheduled<Void>? {
        guard !state.isStopped else { return nil }
        return state.timer.arm(at: state.queue.next, now: now, on: eventLoop) { [weak self] number in self?.fired(number) }
    }

    /// Runs the jobs due and arms the next deadline. A replaced timer that
    /// ran anyway leaves the armed one alone.
    private func fired(_ number: UInt64) {
        let (due, replaced): ([Job], Scheduled<Void>?) = state.withLock { state in
            guard state.timer.fired(number) else { return ([], nil) }
            let now = eventLoop.uptime
            let jobs = state.queue.popDue(now: now).compactMap { state.jobs.removeValue(forKey: $0) }
            return (jobs, rearm(&state, now: now))
        }
        replaced?.cancel()
        for job in due { job() }
    }
}
