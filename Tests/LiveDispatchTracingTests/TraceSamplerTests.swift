import LiveDispatchCore
import Testing

@testable import LiveDispatchTracing

@Suite struct TraceSamplerTests {
    @Test func aRatioOfOneSamplesEveryRootAndZeroNone() {
        for id: UInt64 in [0, 1, 1 << 63, .max - 1, .max] {
            #expect(TraceSampler.always.isSampled(traceIDLow: id, parent: nil))
            #expect(!TraceSampler.never.isSampled(traceIDLow: id, parent: nil))
        }
    }

    @Test func aChildFollowsItsParentsFlagWhateverTheRatio() throws {
        let sampled = try #require(TraceContext(traceIDHigh: 1, traceIDLow: .max, spanID: 2, flags: 1))
        let unsampled = try #require(TraceContext(traceIDHigh: 1, traceIDLow: 0, spanID: 2, flags: 0))
        #expect(TraceSampler.never.isSampled(traceIDLow: .max, parent: sampled))
        #expect(!TraceSampler.always.isSampled(traceIDLow: 0, parent: unsampled))
        // Without parent-based sampling the ratio decides for children too.
        let ratioOnly = TraceSampler(ratio: 1, followsParent: false)
        #expect(ratioOnly.isSampled(traceIDLow: 0, parent: unsampled))
    }

    @Test func theRatioSplitsTheTraceIDRange() {
        let half = TraceSampler(ratio: 0.5)
        #expect(half.isSampled(traceIDLow: (1 << 63) - 1, parent: nil))
        #expect(!half.isSampled(traceIDLow: 1 << 63, parent: nil))
        var random = SplitMix64(seed: 35)
        let sampled = (0..<100_000).filter { _ in TraceSampler(ratio: 0.01).isSampled(traceIDLow: random.next(), parent: nil) }
        #expect((800...1_200).contains(sampled.count))
    }

    @Test func outOfRangeRatiosAreClamped() {
        #expect(TraceSampler(ratio: .nan).ratio == 0)
        #expect(TraceSampler(ratio: -3).ratio == 0)
        #expect(TraceSampler(ratio: 7).ratio == 1)
        #expect(TraceSampler(ratio: .infinity).isSampled(traceIDLow: .max, parent: nil))
    }
}
