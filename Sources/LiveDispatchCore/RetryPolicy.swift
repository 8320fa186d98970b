/// Exponential backoff with full jitter, bounded by attempts and elapsed
/// time (`retry.*`).
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

    /// The wait before retry number `attempt` (1 for the first retry):
    /// uniformly random in [0, min(maxDelay, baseDelay·2^(attempt−1))] —
    /// "full jitter" — with `jitter` in [0, 1) supplied by the caller.
    public func delay(attempt: Int, jitter: Double) -> Double {
        let exponent = Double(min(max(attempt - 1, 0), 52))
        let ceiling = min(maxDelay, baseDelay * (exponent == 0 ? 1 : pow2(exponent)))
        return ceiling * min(max(jitter, 0), 1)
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        for _ in 0..<Int(exponent) { value *= 2 }
        return value
    }
}
