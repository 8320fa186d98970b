import LiveDispatchCore
import Synchronization

/// Hands out `apns-id` values: lowercase version-4 UUIDs, unique within the
/// process, without a system call each (`UUID()` reads the kernel's random
/// source per call, a sixth of a sender's time at 50k pushes/s).
///
/// An id is 16 random hex digits chosen once per sequence, the version and
/// variant digits, and a 64-bit counter scrambled by a bijection (so ids
/// differ in their last groups too, yet never repeat within 2^64 of them).
public final class APNsIDSequence: Sendable {
    private let prefix: (UInt64, UInt64)
    private let counter = Atomic<UInt64>(0)

    public init() {
        var generator = SystemRandomNumberGenerator()
        prefix = (generator.next(), generator.next())
    }

    /// The next id, e.g. `3f2a9c1e-07b4-4d21-8e6f-0a1b2c3d4e5f`.
    public func next() -> String {
        let count = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        return Self.format(high: prefix.0, low: Self.scramble(count ^ prefix.1))
    }

    /// A bijection on 64-bit values: SplitMix64's step and finalizer.
    static func scramble(_ value: UInt64) -> UInt64 {
        SplitMix64.mix(value &+ SplitMix64.increment)
    }

    /// 8-4-4-4-12 lowercase hex of `high` then `low`, with the version
    /// nibble set to 4 and the variant bits to 10.
    static func format(high: UInt64, low: UInt64) -> String {
        let high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return String(unsafeUninitializedCapacity: 36) { buffer in
            let digits: StaticString = "0123456789abcdef"
            var position = 0
            func put(_ value: UInt64, nibbles: Int) {
                var shift = nibbles * 4
                while shift > 0 {
                    shift -= 4
                    buffer[position] = digits.utf8Start[Int((value >> UInt64(shift)) & 0xF)]
                    position += 1
                }
            }
            func dash() {
                buffer[position] = UInt8(ascii: "-")
                position += 1
            }
            put(high >> 32, nibbles: 8)
            dash()
            put(high >> 16, nibbles: 4)
            dash()
            put(high, nibbles: 4)
            dash()
            put(low >> 48, nibbles: 4)
            dash()
            put(low, nibbles: 12)
            return position
        }
    }
}
