import LiveDispatchCore
import NIOCore

extension MachineTimer where Handle == Scheduled<Void> {
    /// ``MachineTimer/arm(at:now:schedule:)`` with the timer scheduled on
    /// `eventLoop`: when it fires, `fire` is called with its number, to be
    /// handed to ``MachineTimer/fired(_:)`` under the owner's lock.
    public mutating func arm(
        at next: UnixTime?, now: UnixTime, on eventLoop: any EventLoop, fire: @escaping @Sendable (UInt64) -> Void
    ) -> Scheduled<Void>? {
        arm(at: next, now: now) { delay, number in
            eventLoop.scheduleTask(in: TimeAmount(delay)) { fire(number) }
        }
    }
}

extension EventLoop {
    /// The event loop's monotonic clock as a ``UnixTime`` (seconds since
    /// an arbitrary start; only differences matter): the time of machines
    /// whose deadlines come from no record.
    public var uptime: UnixTime { UnixTime(seconds: Double(now.uptimeNanoseconds) / 1e9) }
}
