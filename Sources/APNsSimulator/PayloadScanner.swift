import LiveDispatchCore

/// What the rules need from a payload: that it is one JSON value, and the
/// `aps` object's `event` and `timestamp`.
struct PayloadFacts: Sendable, Hashable {
    var apsIsObject = false
    var event: String?
    var hasNumericTimestamp = false

    /// Reads the facts from a parsed payload.
    init(_ value: JSONValue) {
        guard let aps = value["aps"]?.objectValue else { return }
        apsIsObject = true
        event = aps["event"]?.stringValue
        hasNumericTimestamp = aps["timestamp"]?.numberValue != nil
    }

    init() {}
}

/// Checks JSON syntax (RFC 8259) and picks out ``PayloadFacts`` without
/// building the value: the request path of a busy simulator. It refuses
/// what the full parser refuses (duplicate keys included); a payload with
/// escaped keys, an escaped event or deep nesting goes to the full parser.
struct PayloadScanner {
    enum Outcome: Sendable, Hashable {
        case valid(PayloadFacts)
        case invalid
        /// Escapes in a string the facts depend on: use the full parser.
        case needsFullParse
    }

    static let maxDepth = 64

    /// The facts of a payload, or nil when it is not JSON.
    static func facts(of payload: [UInt8]) -> PayloadFacts? {
        switch scan(payload) {
        case .valid(let facts): return facts
        case .invalid: return nil
        case .needsFullParse: return (try? JSONValue.parse(payload)).map(PayloadFacts.init)
        }
    }

    static func scan(_ payload: [UInt8]) -> Outcome {
        payload.withUnsafeBufferPointer { bytes in
            var scanner = PayloadScanner(bytes: bytes)
            return scanner.document()
        }
    }

    /// Where a value sits, for the values the facts need.
    private enum Place {
        case root, aps, event, timestamp, elsewhere
    }

    /// Escapes where the facts are read, or nesting deeper than the scanner
    /// follows: the full parser decides.
    private struct Escaped: Error {}
    private struct Malformed: Error {}

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var facts = PayloadFacts()

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private mutating func document() -> Outcome {
        do {
            skipWhitespace()
            try value(depth: 0, place: .root)
            skipWhitespace()
            guard index == bytes.count else { return .invalid }
            return .valid(facts)
        } catch is Escaped {
            return .needsFullParse
        } catch {
            return .invalid
        }
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws {
        guard current == byte else { throw Malformed() }
        index += 1
    }

    private mutating func value(depth: Int, place: Place) throws {
        guard depth <= Self.maxDepth else { throw Escaped() }
        guard let byte = current else { throw Malformed() }
        switch byte {
        case UInt8(ascii: "{"):
            try object(depth: depth + 1, place: place)
        case UInt8(ascii: "["):
            try array(depth: depth + 1)
        case UInt8(ascii: "\""):
            let (start, end, escaped) = try string()
            if case .event = place {
                if escaped { throw Escaped() }
                facts.event = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            if case .timestamp = place { facts.hasNumericTimestamp = true }
        case UInt8(ascii: "t"):
            try literal("true")
        case UInt8(ascii: "f"):
            try literal("false")
        case UInt8(ascii: "n"):
            try literal("null")
        default:
            throw Malformed()
        }
    }

    private mutating func object(depth: Int, place: Place) throws {
        guard depth <= Self.maxDepth else { throw Escaped() }
        index += 1
        if case .aps = place { facts.apsIsObject = true }
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return
        }
        // Keys seen, as byte ranges: a duplicate makes the payload invalid,
        // as it does for the full parser.
        var keys: [Range<Int>] = []
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw Malformed() }
            let (start, end, escaped) = try string()
            // An escaped key can equal another written differently.
            if escaped { throw Escaped() }
            for key in keys where key.count == end - start && bytes[key].elementsEqual(bytes[start..<end]) {
                throw Malformed()
            }
            keys.append(start..<end)
            let memberPlace: Place
            switch place {
            case .root:
                memberPlace = matches(start, end, "aps") ? .aps : .elsewhere
            case .aps:
                if matches(start, end, "event") {
                    memberPlace = .event
                } else if matches(start, end, "timestamp") {
                    memberPlace = .timestamp
                } else {
                    memberPlace = .elsewhere
                }
            case .event, .timestamp, .elsewhere:
                memberPlace = .elsewhere
            }
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            try value(depth: depth, place: memberPlace)
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "}"))
            return
        }
    }

    private mutating func array(depth: Int) throws {
        guard depth <= Self.maxDepth else { throw Escaped() }
        index += 1
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            try value(depth: depth, place: .elsewhere)
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "]"))
            return
        }
    }

    /// Scans a string; returns the bounds of its contents and whether it had escapes.
    private mutating func string() throws -> (Int, Int, Bool) {
        index += 1
        let start = index
        var escaped = false
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\""):
                let end = index
                index += 1
                return (start, end, escaped)
            case UInt8(ascii: "\\"):
                escaped = true
                index += 1
                guard let next = current else { throw Malformed() }
                switch next {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    index += 1
                    let unit = try hexUnit()
                    switch unit {
                    case 0xD800...0xDBFF:
                        // A high surrogate must be followed by an escaped low one.
                        guard current == UInt8(ascii: "\\") else { throw Malformed() }
                        index += 1
                        guard current == UInt8(ascii: "u") else { throw Malformed() }
                        index += 1
                        guard (0xDC00...0xDFFF).contains(try hexUnit()) else { throw Malformed() }
                    case 0xDC00...0xDFFF:
                        throw Malformed()
                    default:
                        break
                    }
                default:
                    throw Malformed()
                }
            case 0..<0x20:
                throw Malformed()
            case 0x80...:
                try utf8Sequence()
            default:
                index += 1
            }
        }
        throw Malformed()
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hexUnit() throws -> UInt32 {
        var unit: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = current, Self.isHex(digit) else { throw Malformed() }
            let value = Self.isDigit(digit) ? digit - UInt8(ascii: "0") : (digit | 0x20) - UInt8(ascii: "a") + 10
            unit = unit << 4 | UInt32(truncatingIfNeeded: value)
            index += 1
        }
        return unit
    }

    /// Checks one multi-byte UTF-8 sequence (no overlongs, no surrogates).
    private mutating func utf8Sequence() throws {
        let lead = bytes[index]
        let count: Int
        var minimum: UInt32
        var scalar: UInt32
        switch lead {
        case 0xC2...0xDF: (count, minimum, scalar) = (1, 0x80, UInt32(truncatingIfNeeded: lead & 0x1F))
        case 0xE0...0xEF: (count, minimum, scalar) = (2, 0x800, UInt32(truncatingIfNeeded: lead & 0x0F))
        case 0xF0...0xF4: (count, minimum, scalar) = (3, 0x10000, UInt32(truncatingIfNeeded: lead & 0x07))
        default: throw Malformed()
        }
        index += 1
        for _ in 0..<count {
            guard let byte = current, byte & 0xC0 == 0x80 else { throw Malformed() }
            scalar = scalar << 6 | UInt32(truncatingIfNeeded: byte & 0x3F)
            index += 1
        }
        guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { throw Malformed() }
    }

    private mutating func number() throws {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, Self.isDigit(first) else { throw Malformed() }
        index += 1
        if first != UInt8(ascii: "0") {
            while let byte = current, Self.isDigit(byte) { index += 1 }
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let byte = current, Self.isDigit(byte) else { throw Malformed() }
            while let byte = current, Self.isDigit(byte) { index += 1 }
        }
        var hasExponent = false
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            hasExponent = true
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let byte = current, Self.isDigit(byte) else { throw Malformed() }
            while let byte = current, Self.isDigit(byte) { index += 1 }
        }
        // Like the full parser, refuse a number too large for a Double.
        if hasExponent || index - start > 300 {
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else { throw Malformed() }
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw Malformed() }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw Malformed() }
        index += count
    }

    private func matches(_ start: Int, _ end: Int, _ word: StaticString) -> Bool {
        guard end - start == word.utf8CodeUnitCount else { return false }
        for offset in 0..<(end - start) where bytes[start + offset] != word.utf8Start[offset] { return false }
        return true
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isHex(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }
}
