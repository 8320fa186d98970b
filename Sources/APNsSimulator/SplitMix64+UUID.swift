import LiveDispatchCore

extension SplitMix64 {
    /// A random version-4 UUID in lowercase, as APNs generates `apns-id`s.
    mutating func uuid() -> String {
        var high = next()
        var low = next()
        high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000  // version 4
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 4122 variant
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var output = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        var position = 0
        for index in 0..<32 {
            if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
            let word = index < 16 ? high : low
            let shift = UInt64(60 - (index % 16) * 4)
            output[position] = digits[Int((word >> shift) & 0xF)]
            position += 1
        }
        return String(decoding: output, as: UTF8.self)
    }
}
