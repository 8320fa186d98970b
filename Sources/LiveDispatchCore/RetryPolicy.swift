/// How long a push is retried to one token (`retry.*`): bounded by attempts
/// and elapsed time, with a full-jitter ``Backoff`` between sends.
public struct RetryPolicy: Sendable, Hashable {
    /// Sends of one push to one token, the first included.
    public var maxAttempts: Int
    /// Longest time from a token's first failed attempt to giving up.
    public var maxElapsed: Double
    /// Backoff ceiling of the first retry; it doubles per attempt.
    public var baseDelay: Double
    /// Largest backoff ceiling.
    public var maxDelay: Double

    public init(maxAttempts: Int = 6, maxElapsed: Double = 120, baseDelay: Double = 0.2, maxDelay: Double = 30) {
        self.maxAttempts = max(1, maxAttempts)
        self.maxElapsed = maxElapsed
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The backoff between sends of one push to one token: full jitter
    /// under `min(maxDelay, baseDelay·2^(attempt−1))`.
    public var backoff: Backoff { Backoff(base: baseDelay, cap: maxDelay, jitter: .full) }

    /// The wait before retry number `attempt` (1 for the first retry), with
    /// `jitter` in [0, 1) supplied by the caller (see ``backoff``).
    public func delay(attempt: Int, jitter: Double) -> Double {
        backoff.delay(attempt: attempt, draw: jitter)
    }
}
