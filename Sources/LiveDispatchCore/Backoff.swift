/// The wait before a retry: exponential, capped, and spread by a random
/// draw the caller supplies (so a machine that uses it stays a pure
/// function of its inputs, and a test passes a seeded generator).
///
/// Retry number `attempt` (1 for the first retry) has the ceiling
/// `min(cap, base·2^(attempt−1))`; ``Jitter`` says where in that ceiling the
/// wait falls. Every retry in LiveDispatch takes its wait from here: pushes
/// (``RetryPolicy``), channel creation, APNs reconnects, Kafka writes and
/// partition restores.
public struct Backoff: Sendable, Hashable {
    /// How the random draw spreads the wait under the ceiling.
    public enum Jitter: Sendable, Hashable {
        /// Uniform in `[0, ceiling]` ("full jitter"): retries of many
        /// senders that failed together spread over the whole window.
        case full
        /// Uniform in `[ceiling/2, ceiling]`: never much sooner than the
        /// ceiling, still spread.
        case half
        /// Exactly the ceiling; the draw is ignored.
        case none
    }

    /// Ceiling of the first retry, in seconds; it doubles per attempt.
    public var base: Double
    /// Largest ceiling, in seconds.
    public var cap: Double
    public var jitter: Jitter

    public init(base: Double, cap: Double, jitter: Jitter = .full) {
        self.base = base
        self.cap = cap
        self.jitter = jitter
    }

    /// The largest wait before retry number `attempt` (1 for the first):
    /// `min(cap, base·2^(attempt−1))`; attempts below 1 count as 1.
    public func ceiling(attempt: Int) -> Double {
        let exponent = min(max(attempt - 1, 0), 52)
        return min(cap, base * Double(sign: .plus, exponent: exponent, significand: 1))
    }

    /// The wait in seconds before retry number `attempt`, with `draw`
    /// uniform in `[0, 1)` (values outside are clamped into it).
    public func delay(attempt: Int, draw: Double) -> Double {
        let ceiling = ceiling(attempt: attempt)
        let unit = min(max(draw, 0), 1)
        switch jitter {
        case .full: return ceiling * unit
        case .half: return ceiling * (0.5 + 0.5 * unit)
        case .none: return ceiling
        }
    }

    /// The wait in seconds before retry number `attempt`, drawn from
    /// `generator` (nothing is drawn for ``Jitter/none``).
    public func delay<Generator: RandomNumberGenerator>(attempt: Int, using generator: inout Generator) -> Double {
        switch jitter {
        case .full, .half: delay(attempt: attempt, draw: Double.random(in: 0..<1, using: &generator))
        case .none: ceiling(attempt: attempt)
        }
    }
}
