import LiveDispatchCore

/// Per-key rate limiting: one token bucket per API key, refilled at `rate`
/// tokens per second up to `burst`. A value type: the caller passes the time
/// and keeps it under a lock.
struct RateLimiter: Sendable {
    /// What to do with a request.
    enum Decision: Sendable, Hashable {
        case allow
        /// Refuse; a token is available again after this long.
        case refuse(retryAfter: Duration)
    }

    /// One key's bucket.
    struct Bucket: Sendable, Hashable {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let rate: Double
    let burst: Double
    private(set) var buckets: [String: Bucket] = [:]

    /// `rate` requests per second on average, `burst` at once; both at least 1.
    init(rate: Int, burst: Int) {
        self.rate = Double(max(1, rate))
        self.burst = Double(max(1, burst))
    }

    /// Takes one token from `key`'s bucket at `now`, or says how long until one is there.
    mutating func admit(_ key: String, at now: ContinuousClock.Instant) -> Decision {
        var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
        // A clock that went backwards (it cannot with ContinuousClock, but an
        // injected one might) refills nothing rather than a negative amount.
        let elapsed = max(0, (now - bucket.updated).seconds)
        bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
        bucket.updated = now
        defer { buckets[key] = bucket }
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return .allow
        }
        let wait = (1 - bucket.tokens) / rate
        return .refuse(retryAfter: .nanoseconds(Int(saturating: (wait * 1e9).rounded(.up))))
    }

    /// Whole seconds for a `Retry-After` header: never 0, so a client that
    /// obeys it does not retry at once.
    static func retryAfterSeconds(_ wait: Duration) -> Int {
        let seconds = wait.seconds.rounded(.up)
        return seconds < 1 ? 1 : Int(saturating: seconds)
    }
}
