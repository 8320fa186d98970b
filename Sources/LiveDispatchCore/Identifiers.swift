/// The id backends give a Live Activity (Braze's `activity_id`): the Kafka
/// key of its commands, token registrations and state, shared by every
/// device following it.
public struct ActivityID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Longest id accepted, in UTF-8 bytes.
    public static let maxLength = 256

    public let rawValue: String

    /// Validates an id: not empty, at most ``maxLength`` bytes, and without
    /// control characters (U+001F separates the id from the token in
    /// `token-store` keys, so it can never be part of one).
    public init(_ rawValue: String) throws(ValueError) {
        try Self.validate(rawValue, what: "activity id", maxLength: Self.maxLength)
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: ActivityID, rhs: ActivityID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The rules of a Kafka key the worker stores under: not empty, at most
    /// `maxLength` UTF-8 bytes, no control character and nothing that can
    /// fake a line or reorder text where the key is printed (logs, the
    /// console, the CLI): see ``isUnprintable(_:)``.
    static func validate(_ rawValue: String, what: String, maxLength: Int) throws(ValueError) {
        guard !rawValue.isEmpty else { throw ValueError("\(what) is empty") }
        guard rawValue.utf8.count <= maxLength else {
            throw ValueError("\(what) is \(rawValue.utf8.count) bytes, longer than \(maxLength)")
        }
        if let scalar = rawValue.unicodeScalars.first(where: isUnprintable) {
            let hex = String(scalar.value, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            throw ValueError("\(what) \(rawValue.debugDescription) contains \(code), a control, line-separator or bidirectional-formatting character")
        }
    }

    /// A character an identifier may not hold: C0 and C1 controls (U+0085,
    /// NEXT LINE, among them), DEL, the line and paragraph separators
    /// U+2028 and U+2029, and the bidirectional formatting characters
    /// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which
    /// reorder what a terminal or browser shows.
    public static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

/// The key of an audience the backend chose ("user-1", "followers:owls",
/// "order-A-1001"): push-to-start tokens are registered in it and a `start`
/// command addresses it. It is the Kafka key of its tokens and of the
/// audience starts sent to it, so they meet in one partition.
public struct AudienceKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Longest key accepted, in UTF-8 bytes.
    public static let maxLength = 256

    public let rawValue: String

    /// Validates a key: not empty, at most ``maxLength`` bytes, without
    /// control characters (they separate parts of `token-store` keys).
    public init(_ rawValue: String) throws(ValueError) {
        try ActivityID.validate(rawValue, what: "audience key", maxLength: Self.maxLength)
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: AudienceKey, rhs: AudienceKey) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// An APNs device token (an activity's update token or a push-to-start
/// token): hex on the wire and in logs, bytes in memory.
///
/// A worker holds a million of these, so a token of at most
/// ``inlineBytes`` bytes (every token Apple issues today) is stored inline
/// in four machine words with no heap allocation; a longer one, up to
/// ``maxBytes``, falls back to a heap array. Each length has exactly one
/// representation, so equality and hashing compare the stored words.
public struct DeviceToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Longest token accepted, in bytes. Apple's tokens are 32 bytes today
    /// and documented as variable length.
    public static let maxBytes = 200

    /// Shortest token a registration may carry, in bytes: Apple's device
    /// and activity tokens have never been shorter. (Values built in code,
    /// e.g. in tests, may be shorter; registrations read from Kafka may not.)
    public static let minBytes = 32

    /// Longest token stored without a heap allocation, in bytes.
    public static let inlineBytes = 32

    private enum Storage: Sendable, Hashable {
        /// Bytes packed big-endian into four words, zero-padded; `count` ≤ 32.
        case inline(UInt64, UInt64, UInt64, UInt64, count: UInt8)
        case heap([UInt8])
    }

    private let storage: Storage

    /// Parses a token from hex, in either case. A token that is empty, of
    /// odd length, too long or not hex is refused with the reason.
    public init(hex: String) throws(ValueError) {
        let utf8 = Array(hex.utf8)
        guard !utf8.isEmpty else { throw ValueError("device token is empty") }
        guard utf8.count % 2 == 0 else {
            throw ValueError("device token has \(utf8.count) hex digits, expected an even number")
        }
        guard utf8.count / 2 <= Self.maxBytes else {
            throw ValueError("device token is \(utf8.count / 2) bytes, longer than \(Self.maxBytes)")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else {
                let bad = Self.nibble(utf8[index]) == nil ? index : index + 1
                throw ValueError("device token has a non-hex character at position \(bad + 1)")
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.storage = Self.store(bytes)
    }

    public init(bytes: [UInt8]) throws(ValueError) {
        guard !bytes.isEmpty else { throw ValueError("device token is empty") }
        guard bytes.count <= Self.maxBytes else {
            throw ValueError("device token is \(bytes.count) bytes, longer than \(Self.maxBytes)")
        }
        self.storage = Self.store(bytes)
    }

    /// A token built in code from bytes known to be 1 ... ``maxBytes`` long.
    init(unchecked bytes: [UInt8]) { self.storage = Self.store(bytes) }

    private static func store(_ bytes: [UInt8]) -> Storage {
        guard bytes.count <= inlineBytes else { return .heap(bytes) }
        func word(_ first: Int) -> UInt64 {
            var word: UInt64 = 0
            for index in first..<first + 8 {
                word <<= 8
                if index < bytes.count { word |= UInt64(bytes[index]) }
            }
            return word
        }
        return .inline(word(0), word(8), word(16), word(24), count: UInt8(truncatingIfNeeded: bytes.count))
    }

    /// The token's length in bytes.
    public var count: Int {
        switch storage {
        case .inline(_, _, _, _, let count): Int(count)
        case .heap(let bytes): bytes.count
        }
    }

    /// True when the token is held without a heap allocation.
    public var isInline: Bool {
        if case .inline = storage { true } else { false }
    }

    /// Calls `body` with each byte in order, without building an array.
    public func forEachByte(_ body: (UInt8) -> Void) {
        switch storage {
        case .inline(_, _, _, _, let count):
            for index in 0..<Int(count) { body(self[index]) }
        case .heap(let bytes):
            for byte in bytes { body(byte) }
        }
    }

    /// The byte at `index` (0 ..< ``count``).
    public subscript(index: Int) -> UInt8 {
        switch storage {
        case .inline(let w0, let w1, let w2, let w3, _):
            let word = index < 16 ? (index < 8 ? w0 : w1) : (index < 24 ? w2 : w3)
            return UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * (index % 8)))
        case .heap(let bytes):
            return bytes[index]
        }
    }

    /// The token's bytes (an array built on each call for an inline token).
    public var bytes: [UInt8] {
        switch storage {
        case .inline:
            var output: [UInt8] = []
            output.reserveCapacity(count)
            forEachByte { output.append($0) }
            return output
        case .heap(let bytes):
            return bytes
        }
    }

    /// Lowercase hex, as APNs expects it in `/3/device/<token>`.
    public var hex: String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: count * 2) { buffer in
            var position = 0
            digits.withUTF8Buffer { digits in
                forEachByte { byte in
                    buffer[position] = digits[Int(byte >> 4)]
                    buffer[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
            }
            return position
        }
    }

    public var description: String { hex }

    public static func < (lhs: DeviceToken, rhs: DeviceToken) -> Bool {
        if case .inline(let a0, let a1, let a2, let a3, let aCount) = lhs.storage,
            case .inline(let b0, let b1, let b2, let b3, let bCount) = rhs.storage
        {
            // Big-endian packing with zero padding: word order is byte order,
            // and a shorter token that is a prefix of a longer one compares less.
            if a0 != b0 { return a0 < b0 }
            if a1 != b1 { return a1 < b1 }
            if a2 != b2 { return a2 < b2 }
            if a3 != b3 { return a3 < b3 }
            return aCount < bCount
        }
        let shared = min(lhs.count, rhs.count)
        for index in 0..<shared where lhs[index] != rhs[index] { return lhs[index] < rhs[index] }
        return lhs.count < rhs.count
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A value that broke a rule of its type (an empty id, a bad hex token).
public struct ValueError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
