import LiveDispatchCore
import Testing

@Suite("Backoff")
struct BackoffTests {
    @Test("the ceiling doubles per attempt from the base up to the cap; attempts below 1 count as the first")
    func ceilings() {
        let backoff = Backoff(base: 0.5, cap: 4)
        #expect((0...6).map { backoff.ceiling(attempt: $0) } == [0.5, 0.5, 1, 2, 4, 4, 4])
        #expect(backoff.ceiling(attempt: .max) == 4)
        #expect(Backoff(base: 1, cap: .infinity).ceiling(attempt: 1_000) == 0x1p52)
    }

    @Test("full jitter spans [0, ceiling], half jitter [ceiling/2, ceiling], none is the ceiling")
    func jitterModes() {
        let full = Backoff(base: 1, cap: 60, jitter: .full)
        let half = Backoff(base: 1, cap: 60, jitter: .half)
        let none = Backoff(base: 1, cap: 60, jitter: .none)
        #expect(full.delay(attempt: 3, draw: 0) == 0)
        #expect(full.delay(attempt: 3, draw: 0.5) == 2)
        #expect(full.delay(attempt: 3, draw: 1) == 4)
        #expect(half.delay(attempt: 3, draw: 0) == 2)
        #expect(half.delay(attempt: 3, draw: 1) == 4)
        #expect(none.delay(attempt: 3, draw: 0) == 4)
        #expect(none.delay(attempt: 3, draw: 0.3) == 4)
    }

    @Test("a draw outside [0, 1] is clamped into it")
    func clampedDraws() {
        let backoff = Backoff(base: 1, cap: 60)
        #expect(backoff.delay(attempt: 2, draw: -5) == 0)
        #expect(backoff.delay(attempt: 2, draw: 7) == 2)
    }

    @Test("draws from a seeded generator repeat with the seed and stay under the ceiling", arguments: [1, 7, 42] as [UInt64])
    func seeded(seed: UInt64) {
        for jitter in [Backoff.Jitter.full, .half, .none] {
            let backoff = Backoff(base: 0.2, cap: 30, jitter: jitter)
            var first = SplitMix64(seed: seed)
            var second = SplitMix64(seed: seed)
            let delays = (1...40).map { backoff.delay(attempt: $0, using: &first) }
            #expect(delays == (1...40).map { backoff.delay(attempt: $0, using: &second) })
            for (index, delay) in delays.enumerated() {
                let ceiling = backoff.ceiling(attempt: index + 1)
                let floor = jitter == .full ? 0 : jitter == .half ? ceiling / 2 : ceiling
                #expect(delay >= floor && delay <= ceiling)
            }
        }
    }

    @Test("full jitter uses the whole window: a seeded run lands in each quarter of it")
    func fullJitterSpreads() {
        let backoff = Backoff(base: 8, cap: 8)
        var generator = SplitMix64(seed: 2026)
        var quarters = Set<Int>()
        for _ in 0..<200 { quarters.insert(min(3, Int(backoff.delay(attempt: 1, using: &generator) / 2))) }
        #expect(quarters == [0, 1, 2, 3])
    }

    @Test("the retry policy's delay is its full-jitter backoff")
    func retryPolicy() {
        let policy = RetryPolicy(maxAttempts: 10, maxElapsed: 100, baseDelay: 0.5, maxDelay: 4)
        #expect(policy.backoff == Backoff(base: 0.5, cap: 4, jitter: .full))
        for attempt in 1...6 {
            for draw in [0, 0.25, 0.999] {
                #expect(policy.delay(attempt: attempt, jitter: draw) == policy.backoff.delay(attempt: attempt, draw: draw))
            }
        }
    }
}

@Suite("SplitMix64")
struct SplitMix64Tests {
    @Test("a seed names its sequence; the first draws match the reference values")
    func reference() {
        var generator = SplitMix64(seed: 1_234_567)
        // Reference values of SplitMix64 for seed 1234567.
        #expect(generator.next() == 6_457_827_717_110_365_317)
        #expect(generator.next() == 3_203_168_211_198_807_973)
        var again = SplitMix64(seed: 1_234_567)
        #expect((0..<100).map { _ in again.next() }.dropFirst(2).first == generator.next())
    }

    @Test("unit draws lie in [0, 1) and bounded draws below their bound")
    func ranges() {
        var generator = SplitMix64(seed: 9)
        for _ in 0..<1_000 {
            #expect((0..<1).contains(generator.unit()))
            #expect((0..<7).contains(generator.below(7)))
        }
        #expect(generator.below(0) == 0)
    }
}

@Suite("Duration helpers")
struct DurationHelperTests {
    @Test("seconds and nanoseconds of a duration, saturating at Int64's bounds")
    func conversions() {
        #expect(Duration.milliseconds(1_500).seconds == 1.5)
        #expect(Duration.seconds(-2).seconds == -2)
        #expect(Duration.milliseconds(1_500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
    }
}
