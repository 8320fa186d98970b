/// SplitMix64: a small, fast, seeded random number generator.
///
/// For randomized tests, the fuzz mutator and the simulator's fault draws,
/// which need reproducible spread, not secrecy: a run seeded with the same
/// number draws the same sequence, so a failure names its seed.
public struct SplitMix64: RandomNumberGenerator, Sendable, Hashable {
    /// The generator's whole state; the next draw depends on it alone.
    public var state: UInt64

    /// A generator that draws the sequence of `seed`.
    public init(seed: UInt64) { state = seed }

    /// A generator seeded once from the system's random source.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    public mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    /// A uniform draw in `0..<1` with 53 random bits.
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A number in `0..<bound` (by remainder, so very slightly biased for
    /// large bounds); 0 when `bound` is less than 1.
    public mutating func below(_ bound: Int) -> Int {
        Int(truncatingIfNeeded: next() % UInt64(truncatingIfNeeded: max(1, bound)))
    }

    /// The golden-ratio step added to the state per draw.
    public static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// SplitMix64's finalizer: a bijection on 64-bit values that spreads
    /// nearby inputs far apart.
    public static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
