import LiveDispatchCore

/// Decides whether a new span is recorded: parent-based, with a trace-id
/// ratio for roots.
///
/// A span with a parent follows the parent's sampled flag, so a trace is
/// kept or dropped whole across services. A root span is sampled when its
/// trace id's low 64 bits fall below `ratio` of their range, so every
/// service that uses the same ratio decides the same for the same trace.
public struct TraceSampler: Sendable, Hashable {
    /// The share of root traces recorded, in `0...1`.
    public let ratio: Double
    /// Whether a child follows its parent's flag (`parentbased_*` samplers)
    /// or is decided by the ratio like a root (`traceidratio`).
    public let followsParent: Bool
    /// Trace ids whose low 64 bits are below this are sampled.
    let threshold: UInt64

    /// A sampler recording `ratio` of root traces; a ratio outside `0...1`
    /// (or NaN) is clamped, NaN to 0.
    public init(ratio: Double, followsParent: Bool = true) {
        let clamped = ratio.isNaN ? 0 : min(1, max(0, ratio))
        self.ratio = clamped
        self.followsParent = followsParent
        // 2^64 as a Double is exactly representable; anything at or above it
        // samples every id.
        let scaled = clamped * 0x1.0p64
        threshold = UInt64(exactly: scaled.rounded(.down)) ?? .max
    }

    /// Records every trace.
    public static let always = TraceSampler(ratio: 1)
    /// Records no trace unless a parent was sampled.
    public static let never = TraceSampler(ratio: 0)

    /// Whether a span of trace `traceIDLow` with `parent` (nil for a root)
    /// is recorded.
    public func isSampled(traceIDLow: UInt64, parent: TraceContext?) -> Bool {
        if followsParent, let parent { return parent.isSampled }
        return samples(traceIDLow)
    }

    /// Whether a uniformly spread 64-bit value (a trace id, a token's
    /// hash) falls in the sampled share.
    public func samples(_ value: UInt64) -> Bool {
        threshold == .max || value < threshold
    }
}

extension TraceSampler {
    /// The samplers of `OTEL_TRACES_SAMPLER` that this one can be.
    public static let names = [
        "parentbased_traceidratio", "traceidratio", "parentbased_always_on", "always_on", "parentbased_always_off", "always_off",
    ]

    /// The sampler `OTEL_TRACES_SAMPLER` names, with `ratio` for the two
    /// ratio samplers; nil for a name this tracer does not have.
    public init?(named name: String, ratio: Double) {
        switch name {
        case "parentbased_traceidratio": self.init(ratio: ratio, followsParent: true)
        case "traceidratio": self.init(ratio: ratio, followsParent: false)
        case "parentbased_always_on": self.init(ratio: 1, followsParent: true)
        case "always_on": self.init(ratio: 1, followsParent: false)
        case "parentbased_always_off": self.init(ratio: 0, followsParent: true)
        case "always_off": self.init(ratio: 0, followsParent: false)
        default: return nil
        }
    }
}
