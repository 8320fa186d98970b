/// Why a JSON text could not be read, and where.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, e.g. "expected ',' or '}' after an object member".
    public var message: String
    /// 1-based line of the offending byte.
    public var line: Int
    /// 1-based column (in bytes) of the offending byte.
    public var column: Int
    /// 0-based byte offset of the offending byte.
    public var offset: Int
    /// Where in the document it was found: the members and elements whose
    /// values were being read, outermost first; empty at the top level.
    public var path: [JSONPathComponent] = []
    /// The text is JSON, but a number in it cannot be carried exactly
    /// (``JSONValue/parse(_:limits:)`` says which numbers can).
    public var isInexactNumber = false

    /// The path as LiveDispatch names fields: `content_state.scores[1]`.
    public var field: String { JSONPathComponent.field(path) }

    /// The position and the message; for a refused number, its field too
    /// (the text is JSON there: the field is what to change).
    public var description: String {
        guard isInexactNumber, !path.isEmpty else { return "line \(line), column \(column): \(message)" }
        return "line \(line), column \(column), field '\(field)': \(message)"
    }

    /// The same error found inside the member or element `component`.
    func within(_ component: JSONPathComponent) -> JSONParseError {
        var inner = self
        inner.path.insert(component, at: 0)
        return inner
    }
}

/// One step of a path into a JSON document: an object's member or an array's element.
public enum JSONPathComponent: Sendable, Hashable {
    case member(String)
    case element(Int)

    /// Dotted members, bracketed elements: `content_state.scores[1]`.
    public static func field(_ path: [JSONPathComponent]) -> String {
        var field = ""
        for component in path {
            switch component {
            case .member(let key): field += field.isEmpty ? key : ".\(key)"
            case .element(let index): field += "[\(index)]"
            }
        }
        return field
    }
}

/// Bounds a parse so that hostile input cannot exhaust the stack or memory.
public struct JSONParseLimits: Sendable, Hashable {
    /// Deepest nesting of arrays and objects accepted.
    public var maxDepth: Int
    /// Largest input accepted, in bytes.
    public var maxBytes: Int

    public init(maxDepth: Int = 64, maxBytes: Int = 1 << 20) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }

    public static let `default` = JSONParseLimits()
}

extension JSONValue {
    /// Parses one JSON text (RFC 8259). Whitespace may surround it; anything
    /// else after it is an error.
    ///
    /// Every number is carried exactly or refused, never rounded. A number
    /// written without a fraction or an exponent is an ``integer(_:)`` and
    /// must lie in -9223372036854775808...9223372036854775807. Any other is
    /// a ``double(_:)`` and must be the very decimal value its double is
    /// written back as (the shortest form that reads back the same): any
    /// number of up to 15 significant digits in the double's range is, and
    /// `1e-400` (read as 0), `1e400` (infinite) or `0.10000000000000000001`
    /// (more digits than a double keeps) are refused, the error
    /// ``JSONParseError/isInexactNumber`` with the number's path.
    public static func parse(_ text: String, limits: JSONParseLimits = .default) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }

    /// Parses one JSON text from UTF-8 bytes.
    public static func parse(_ bytes: [UInt8], limits: JSONParseLimits = .default) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try parse(utf8: buffer, limits: limits)
        }
    }

    /// Parses one JSON text from UTF-8 bytes in place, without copying them.
    public static func parse(utf8 buffer: UnsafeBufferPointer<UInt8>, limits: JSONParseLimits = .default) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: buffer, limits: limits)
        if buffer.count > limits.maxBytes {
            throw parser.error("input is \(buffer.count) bytes, more than the limit of \(limits.maxBytes)", at: 0)
        }
        parser.skipWhitespace()
        if parser.isAtEnd { throw parser.error("empty input, expected a JSON value") }
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        if !parser.isAtEnd { throw parser.error("unexpected \(parser.describeCurrent()) after the JSON value") }
        return value
    }
}

struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let limits: JSONParseLimits
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, limits: JSONParseLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    var isAtEnd: Bool { index >= bytes.count }

    func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        let position = min(offset ?? index, bytes.count)
        var line = 1
        var column = 1
        for byte in bytes[0..<position] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return JSONParseError(message: message, line: line, column: column, offset: position)
    }

    func describeCurrent() -> String {
        guard !isAtEnd else { return "end of input" }
        let byte = bytes[index]
        if byte >= 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16))"
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard !isAtEnd else { throw error("unexpected end of input, expected a JSON value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected \(describeCurrent()), expected a JSON value")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = index
        let count = literal.utf8CodeUnitCount
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        guard bytes.count - index >= count, bytes[index..<index + count].elementsEqual(expected) else {
            throw error("invalid literal, expected '\(literal)'", at: start)
        }
        index += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > limits.maxDepth { throw error("nesting deeper than the limit of \(limits.maxDepth)") }
        index += 1
        var fields: [String: JSONValue] = [:]
        skipWhitespace()
        if !isAtEnd && bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(fields)
        }
        // Room for a command's or a registration's fields at once, not by doubling.
        fields.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard !isAtEnd, bytes[index] == UInt8(ascii: "\"") else {
                throw error("unexpected \(describeCurrent()), expected a string key in an object")
            }
            let keyOffset = index
            let key = try parseString()
            skipWhitespace()
            guard !isAtEnd, bytes[index] == UInt8(ascii: ":") else {
                throw error("unexpected \(describeCurrent()), expected ':' after the object key \"\(key)\"")
            }
            index += 1
            skipWhitespace()
            let value: JSONValue
            do {
                value = try parseValue(depth: depth)
            } catch {
                throw error.within(.member(key))
            }
            if fields.updateValue(value, forKey: key) != nil {
                throw error("duplicate object key \"\(key)\"", at: keyOffset)
            }
            skipWhitespace()
            guard !isAtEnd else { throw error("unexpected end of input, expected ',' or '}' in an object") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return .object(fields)
            default: throw error("unexpected \(describeCurrent()), expected ',' or '}' in an object")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > limits.maxDepth { throw error("nesting deeper than the limit of \(limits.maxDepth)") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if !isAtEnd && bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            do {
                elements.append(try parseValue(depth: depth))
            } catch {
                throw error.within(.element(elements.count))
            }
            skipWhitespace()
            guard !isAtEnd else { throw error("unexpected end of input, expected ',' or ']' in an array") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(elements)
            default: throw error("unexpected \(describeCurrent()), expected ',' or ']' in an array")
            }
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        let quote = index
        index += 1
        let start = index
        // Fast path: no escapes, valid UTF-8 checked by String(validating:);
        // a string of ASCII bytes only (most keys and values) needs no check.
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                let validated = ascii ? String(decoding: slice, as: UTF8.self) : String(validating: slice, as: UTF8.self)
                guard let text = validated else {
                    throw error("string is not valid UTF-8", at: quote)
                }
                index += 1
                return text
            }
            ascii = ascii && byte < 0x80
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character 0x\(String(byte, radix: 16)) must be escaped in a string") }
            index += 1
        }
        var scratch = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: scratch, as: UTF8.self) else {
                    throw error("string is not valid UTF-8", at: quote)
                }
                index += 1
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard !isAtEnd else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scratch.append(0x22)
                case UInt8(ascii: "\\"): scratch.append(0x5C)
                case UInt8(ascii: "/"): scratch.append(0x2F)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    scratch.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in a string", at: index - 2)
                }
            default:
                if byte < 0x20 { throw error("control character 0x\(String(byte, radix: 16)) must be escaped in a string") }
                scratch.append(byte)
                index += 1
            }
        }
        throw error("unterminated string", at: quote)
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("incomplete \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in a \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let escapeStart = index - 2
        let high = try parseHex4()
        if (0xD800...0xDBFF).contains(high) {
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("unpaired UTF-16 surrogate in a \\u escape", at: escapeStart)
            }
            index += 2
            let low = try parseHex4()
            guard (0xDC00...0xDFFF).contains(low) else {
                throw error("invalid UTF-16 surrogate pair in a \\u escape", at: escapeStart)
            }
            let combined = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw error("invalid \\u escape", at: escapeStart) }
            return scalar
        }
        guard let scalar = Unicode.Scalar(high) else {
            throw error("unpaired UTF-16 surrogate in a \\u escape", at: escapeStart)
        }
        return scalar
    }

    /// 10^0 through 10^22: the powers of ten a Double holds exactly.
    static let powersOfTen: [Double] = (0...22).map { exponent in (0..<exponent).reduce(1.0) { value, _ in value * 10 } }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard !isAtEnd, isDigit(bytes[index]) else { throw error("invalid number, expected a digit", at: start) }
        // Integers accumulate as they are scanned (negated, so Int64.min fits); overflow is a refusal.
        var magnitude: Int64 = 0
        var overflow = false
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if !isAtEnd && isDigit(bytes[index]) { throw error("invalid number, leading zeros are not allowed", at: start) }
        } else {
            while !isAtEnd && isDigit(bytes[index]) {
                let digit = Int64(bytes[index] &- UInt8(ascii: "0"))
                let (times10, overflowA) = magnitude.multipliedReportingOverflow(by: 10)
                let (next, overflowB) = times10.subtractingReportingOverflow(digit)
                overflow = overflow || overflowA || overflowB
                magnitude = next
                index += 1
            }
        }
        // A decimal of at most 15 digits is its digits over a power of ten,
        // both exact in a Double, so one division rounds it as strtod would;
        // and 15 significant digits always read back from the double they make.
        var fraction: (digits: UInt64, count: Int)?
        if !isAtEnd && bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard !isAtEnd, isDigit(bytes[index]) else { throw error("invalid number, expected a digit after '.'", at: start) }
            var digits = overflow ? UInt64.max : magnitude.magnitude
            var count = 0
            while !isAtEnd && isDigit(bytes[index]) {
                if digits < 100_000_000_000_000 { digits = digits * 10 + UInt64(bytes[index] &- UInt8(ascii: "0")) } else { digits = .max }
                count += 1
                index += 1
            }
            fraction = (digits, count)
        }
        if !isAtEnd && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            fraction = nil
            isInteger = false
            index += 1
            if !isAtEnd && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            guard !isAtEnd, isDigit(bytes[index]) else { throw error("invalid number, expected a digit in the exponent", at: start) }
            while !isAtEnd && isDigit(bytes[index]) { index += 1 }
        }
        if isInteger {
            if !overflow {
                if negative { return .integer(magnitude) }
                if magnitude != Int64.min { return .integer(-magnitude) }
            }
            throw inexact("integer \(literal(from: start)) is outside the 64-bit range -9223372036854775808...9223372036854775807", at: start)
        }
        if let fraction, fraction.digits < 1_000_000_000_000_000, fraction.count < Self.powersOfTen.count {
            let value = Double(fraction.digits) / Self.powersOfTen[fraction.count]
            return .double(negative ? -value : value)
        }
        let written = UnsafeBufferPointer(rebasing: bytes[start..<index])
        guard let double = Double(String(decoding: written, as: UTF8.self)), double.isFinite else {
            throw inexact("number \(literal(from: start)) is beyond the range of a 64-bit double", at: start)
        }
        var shortest = double.description
        let same = shortest.withUTF8 { Self.decimal(written) == Self.decimal($0) }
        guard same else {
            let reason = double == 0 ? "is too small for a 64-bit double (it would be read as 0)" : "would be rounded to \(shortest) by a 64-bit double"
            throw inexact("number \(literal(from: start)) \(reason)", at: start)
        }
        return .double(double)
    }

    /// A refusal of a number that is JSON but cannot be carried exactly.
    func inexact(_ message: String, at offset: Int) -> JSONParseError {
        var refusal = error("\(message); send it as a string to keep every digit", at: offset)
        refusal.isInexactNumber = true
        return refusal
    }

    /// The number read from `start`, cut to 40 bytes for a message.
    func literal(from start: Int) -> String {
        let written = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return written.utf8.count > 40 ? "\(written.prefix(40))…" : written
    }

    /// The decimal value of a number's text (JSON's grammar, which Swift's
    /// `description` of a finite double follows too): its sign, its
    /// significant digits (no leading or trailing zeros) and the power of
    /// ten of the point before them, `0.d₁d₂… × 10^exponent`. Zero is
    /// `(false, [], 0)` whatever its sign.
    static func decimal(_ text: UnsafeBufferPointer<UInt8>) -> (negative: Bool, digits: [UInt8], exponent: Int) {
        var position = 0
        let negative = text.first == UInt8(ascii: "-")
        if negative { position += 1 }
        var digits: [UInt8] = []
        var point = 0
        var afterPoint = false
        scan: while position < text.count {
            switch text[position] {
            case UInt8(ascii: "0") where digits.isEmpty:
                if afterPoint { point -= 1 }
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                digits.append(text[position])
                if !afterPoint { point += 1 }
            case UInt8(ascii: "."):
                afterPoint = true
            default:
                break scan
            }
            position += 1
        }
        // The exponent, held below a billion: past that a double is 0 or infinite anyway.
        var exponent = 0
        var exponentNegative = false
        if position < text.count {
            position += 1
            if position < text.count, text[position] == UInt8(ascii: "-") || text[position] == UInt8(ascii: "+") {
                exponentNegative = text[position] == UInt8(ascii: "-")
                position += 1
            }
            while position < text.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[position]) {
                exponent = min(exponent * 10 + Int(text[position] &- UInt8(ascii: "0")), 1_000_000_000)
                position += 1
            }
        }
        while digits.last == UInt8(ascii: "0") { digits.removeLast() }
        guard !digits.isEmpty else { return (false, [], 0) }
        return (negative, digits, point + (exponentNegative ? -exponent : exponent))
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
