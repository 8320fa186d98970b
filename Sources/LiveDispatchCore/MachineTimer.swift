/// The one wake-up a machine with deadlines keeps armed: every owner of a
/// machine that has a `nextDeadline` keeps one of these beside the machine,
/// under the machine's lock, and asks it after each input whether to arm,
/// re-arm or leave the timer. The scheduling itself is the owner's
/// (`Handle` is what it gets back, a NIO `Scheduled<Void>` in the shells);
/// the decisions are made here, once.
///
/// The re-arm policy:
/// - No timer armed and a deadline: arm one at it.
/// - A deadline earlier than the armed one: arm a new timer at it and hand
///   back the replaced one, for the owner to cancel after it released its
///   lock.
/// - The same deadline or a later one: leave the armed timer. It fires
///   early, the machine finds nothing due, and the re-arm after the firing
///   arms the next deadline. A deadline that keeps moving later (a request
///   ended, an idle ping put off) costs one early wake-up instead of a
///   cancel and a schedule per input.
/// - No deadline: hand back the armed timer to cancel; an idle machine
///   keeps no timer.
///
/// A timer is spent once it fired (``fired(_:)``): the re-arm after it arms
/// the next deadline even when that is the same one. The machine's clock
/// and the event loop's need not agree. A machine whose dates come from
/// records runs on the wall clock while the event loop's timers run on its
/// monotonic clock, so a timer can fire while the wall clock still says its
/// deadline is ahead (a slewed or stepped clock); re-arming only on a
/// changed deadline would then leave the machine with no timer at all.
///
/// Each timer carries its number. A replaced timer whose cancellation came
/// too late runs anyway: ``fired(_:)`` tells it apart by its number and the
/// armed timer is left alone.
public struct MachineTimer<Handle: Sendable>: Sendable {
    /// The armed timer: the deadline it fires at, its number and the owner's handle.
    public struct Armed: Sendable {
        public let at: UnixTime
        public let number: UInt64
        public let handle: Handle
    }

    /// The timer armed now, if any.
    public private(set) var armed: Armed?
    /// How many timers were armed so far; the last one's number.
    public private(set) var timersArmed: UInt64 = 0

    public init() {}

    /// Brings the timer in line with the machine's next deadline `next` at
    /// time `now` (both on the machine's clock). When a timer is to be
    /// armed, `schedule` is called with its delay (zero for a deadline
    /// already past) and its number, which the scheduled work hands back to
    /// ``fired(_:)``. Returns the timer to cancel, if any; the owner cancels
    /// it after releasing its lock.
    public mutating func arm(at next: UnixTime?, now: UnixTime, schedule: (_ delay: Duration, _ number: UInt64) throws -> Handle) rethrows -> Handle? {
        guard let next else { return disarm() }
        if let armed, armed.at <= next { return nil }
        let replaced = armed?.handle
        timersArmed &+= 1
        let number = timersArmed
        let handle = try schedule(Self.delay(from: now, to: next), number)
        armed = Armed(at: next, number: number, handle: handle)
        return replaced
    }

    /// A timer numbered `number` fired. Returns true when it is the armed
    /// one, which is then spent: the machine is to be woken and the timer
    /// re-armed with ``arm(at:now:schedule:)``. Returns false for a
    /// replaced or cancelled timer that ran anyway; the armed one stays.
    public mutating func fired(_ number: UInt64) -> Bool {
        guard armed?.number == number else { return false }
        armed = nil
        return true
    }

    /// Forgets the armed timer and returns it for the owner to cancel, when
    /// the machine stops.
    public mutating func disarm() -> Handle? {
        defer { armed = nil }
        return armed?.handle
    }

    /// The wait from `now` until `deadline`, rounded up to the nanosecond:
    /// zero for a deadline already past (or not a number), and at most
    /// ``longestDelay``, so no time can trap the conversion.
    public static func delay(from now: UnixTime, to deadline: UnixTime) -> Duration {
        let seconds = deadline - now
        guard seconds > 0 else { return .zero }
        let nanoseconds = (seconds * 1e9).rounded(.up)
        guard nanoseconds < Double(longestDelay.nanoseconds) else { return longestDelay }
        return .nanoseconds(Int64(exactly: nanoseconds) ?? longestDelay.nanoseconds)
    }

    /// The longest wait a timer is armed for, about 146 years: a deadline
    /// beyond it is woken early and armed again.
    public static var longestDelay: Duration { .nanoseconds(Int64.max / 2) }
}
