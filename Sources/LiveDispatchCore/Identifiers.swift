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
    /// `maxLength` UTF-8 bytes, no control characters.
    static func validate(_ rawValue: String, what: String, maxLength: Int) throws(ValueError) {
        guard !rawValue.isEmpty else { throw ValueError("\(what) is empty") }
        guard rawValue.utf8.count <= maxLength else {
            throw ValueError("\(what) is \(rawValue.utf8.count) bytes, longer than \(maxLength)")
        }
        guard !rawValue.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw ValueError("\(what) \(rawValue.debugDescription) contains a control character")
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
public struct DeviceToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Longest token accepted, in bytes. Apple's tokens are 32 bytes today
    /// and documented as variable length.
    public static let maxBytes = 200

    /// Shortest token a registration may carry, in bytes: Apple's device
    /// and activity tokens have never been shorter. (Values built in code,
    /// e.g. in tests, may be shorter; registrations read from Kafka may not.)
    public static let minBytes = 32

    public let bytes: [UInt8]

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
        self.bytes = bytes
    }

    public init(bytes: [UInt8]) throws(ValueError) {
        guard !bytes.isEmpty else { throw ValueError("device token is empty") }
        guard bytes.count <= Self.maxBytes else {
            throw ValueError("device token is \(bytes.count) bytes, longer than \(Self.maxBytes)")
        }
        self.bytes = bytes
    }

    /// Lowercase hex, as APNs expects it in `/3/device/<token>`.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    public var description: String { hex }

    public static func < (lhs: DeviceToken, rhs: DeviceToken) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
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
