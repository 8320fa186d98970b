@testable import LiveDispatchHTTP
import Testing

@Suite("Rate limiter")
struct RateLimiterTests {
    let start = ContinuousClock.now

    @Test("a quiet key may make `burst` requests at once, then is refused with the wait for one token")
    func burstThenRefuse() {
        var limiter = RateLimiter(rate: 2, burst: 3)
        for _ in 0..<3 { #expect(limiter.admit("backend", at: start) == .allow) }
        #expect(limiter.admit("backend", at: start) == .refuse(retryAfter: .milliseconds(500)))
    }

    @Test("tokens come back at `rate` per second, never above `burst`")
    func refill() {
        var limiter = RateLimiter(rate: 10, burst: 2)
        #expect(limiter.admit("k", at: start) == .allow)
        #expect(limiter.admit("k", at: start) == .allow)
        #expect(limiter.admit("k", at: start) != .allow)
        // 100 ms later one token is back, and only one.
        let later = start + .milliseconds(100)
        #expect(limiter.admit("k", at: later) == .allow)
        #expect(limiter.admit("k", at: later) != .allow)
        // An hour of quiet refills to the burst, not to 36,000.
        let muchLater = later + .seconds(3600)
        #expect(limiter.admit("k", at: muchLater) == .allow)
        #expect(limiter.admit("k", at: muchLater) == .allow)
        #expect(limiter.admit("k", at: muchLater) != .allow)
    }

    @Test("each key has its own bucket")
    func perKey() {
        var limiter = RateLimiter(rate: 1, burst: 1)
        #expect(limiter.admit("a", at: start) == .allow)
        #expect(limiter.admit("a", at: start) != .allow)
        #expect(limiter.admit("b", at: start) == .allow)
    }

    @Test("an instant earlier than the last one refills nothing")
    func clockBackwards() {
        var limiter = RateLimiter(rate: 1, burst: 1)
        #expect(limiter.admit("a", at: start + .seconds(10)) == .allow)
        #expect(limiter.admit("a", at: start) != .allow)
    }

    @Test("Retry-After is whole seconds, at least 1")
    func retryAfter() {
        #expect(RateLimiter.retryAfterSeconds(.milliseconds(1)) == 1)
        #expect(RateLimiter.retryAfterSeconds(.milliseconds(1001)) == 2)
        #expect(RateLimiter.retryAfterSeconds(.zero) == 1)
    }
}
