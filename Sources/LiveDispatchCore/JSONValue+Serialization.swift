extension JSONValue {
    /// The compact UTF-8 JSON text of the value, object keys sorted.
    ///
    /// Non-finite doubles, which JSON cannot express, are written as `null`.
    public func serialized() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(to: &output)
        return output
    }

    /// The compact JSON text of the value as a `String`.
    public func serializedString() -> String {
        String(decoding: serialized(), as: UTF8.self)
    }

    /// Appends the compact JSON text of the value to `output`.
    public func write(to output: inout [UInt8]) {
        switch self {
        case .null:
            JSONValue.writeLiteral("null", to: &output)
        case .bool(let flag):
            JSONValue.writeLiteral(flag ? "true" : "false", to: &output)
        case .integer(let value):
            JSONValue.writeInteger(value, to: &output)
        case .double(let value):
            JSONValue.writeDouble(value, to: &output)
        case .string(let text):
            JSONValue.writeString(text, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                element.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let fields):
            JSONValue.writeObject(fields, to: &output)
        }
    }

    /// Appends an object of `fields`, keys sorted.
    static func writeObject(_ fields: [String: JSONValue], to output: inout [UInt8]) {
        guard !fields.isEmpty else {
            writeLiteral("{}", to: &output)
            return
        }
        output.append(UInt8(ascii: "{"))
        // Sorted as pairs: no second lookup of each key.
        for (position, field) in fields.sorted(by: { $0.key < $1.key }).enumerated() {
            if position > 0 { output.append(UInt8(ascii: ",")) }
            writeString(field.key, to: &output)
            output.append(UInt8(ascii: ":"))
            field.value.write(to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    /// Writes a double as JSON: integral values of moderate size without a
    /// fraction (`3.0` becomes `3`), others in Swift's shortest round-trip form.
    static func writeDouble(_ value: Double, to output: inout [UInt8]) {
        guard value.isFinite else {
            writeLiteral("null", to: &output)
            return
        }
        if let whole = wholeForm(value) {
            writeInteger(whole, to: &output)
            return
        }
        writeDescription(value, to: &output)
    }

    /// Appends `value.description`. A value kept to the millisecond (as
    /// remembered times are, ``ActivityState/millisecond(_:)``) in the range
    /// of dates (``UnixTime/acceptedRange``) is written digit by digit: its
    /// shortest decimal is its whole part and up to three decimals without
    /// trailing zeros (far below where a double's spacing reaches a
    /// millisecond). Any other value goes through `description`.
    static func writeDescription(_ value: Double, to output: inout [UInt8]) {
        let milliseconds = (value * 1000).rounded()
        guard milliseconds / 1000 == value, UnixTime.acceptedRange.contains(value),
              let whole = Int64(exactly: milliseconds)
        else {
            var text = value.description
            text.withUTF8 { output.append(contentsOf: $0) }
            return
        }
        writeInteger(whole / 1000, to: &output)
        output.append(UInt8(ascii: "."))
        let fraction = whole % 1000
        for divisor: Int64 in [100, 10, 1] { output.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fraction / divisor % 10)) }
        // Trailing zeros dropped, one digit kept: `.5`, `.0`.
        for _ in 0..<2 where output.last == UInt8(ascii: "0") { output.removeLast() }
    }

    /// Appends a literal's bytes (a `StaticString` is read in place, not
    /// copied through a `String`'s view).
    static func writeLiteral(_ literal: StaticString, to output: inout [UInt8]) {
        literal.withUTF8Buffer { output.append(contentsOf: $0) }
    }

    /// Appends `value` in decimal, digit by digit (no `String` made): from
    /// the last digit, dividing by the constant 10 (which compiles to a
    /// multiplication, not a division instruction), into a buffer on the stack.
    static func writeInteger(_ value: Int64, to output: inout [UInt8]) {
        if value < 0 { output.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        // UInt64.max has 20 digits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            output.append(contentsOf: UnsafeMutableBufferPointer(rebasing: digits[start...]))
        }
    }

    /// The integer a finite double of moderate size is written as, when it has no fraction.
    static func wholeForm(_ value: Double) -> Int64? {
        guard value.isFinite, value.rounded(.towardZero) == value, abs(value) < 1e15 else { return nil }
        return Int64(exactly: value)
    }

    static func writeString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        // Contiguous UTF-8 (native strings always are): runs of bytes that
        // need no escape are copied whole, not a byte at a time.
        text.withUTF8 { bytes in
            var runStart = 0
            for index in bytes.indices where needsEscape(bytes[index]) {
                if runStart < index { output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index])) }
                writeEscape(bytes[index], to: &output)
                runStart = index + 1
            }
            if runStart < bytes.count { output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func writeEscape(_ byte: UInt8, to output: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
        case 0x0A: output.append(contentsOf: #"\n"#.utf8)
        case 0x0D: output.append(contentsOf: #"\r"#.utf8)
        case 0x09: output.append(contentsOf: #"\t"#.utf8)
        case 0x08: output.append(contentsOf: #"\b"#.utf8)
        case 0x0C: output.append(contentsOf: #"\f"#.utf8)
        default:
            output.append(contentsOf: "\\u00".utf8)
            output.append(hexDigit(byte >> 4))
            output.append(hexDigit(byte & 0x0F))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

/// Writes one JSON object member by member, its keys given by the caller in
/// the serializer's order (sorted by their bytes): the same bytes as
/// ``JSONValue/serialized()`` of the object, without building and sorting
/// it. For the records written per event or per push.
struct JSONObjectWriter {
    private(set) var output: [UInt8]
    private var first = true

    /// Starts the object after `prefix` (the start of an enclosing value, if any).
    init(prefix: [UInt8] = [], capacity: Int = 256) {
        output = prefix
        output.reserveCapacity(capacity)
    }

    /// Starts the object at the end of `buffer`, taking the buffer over
    /// (left empty) so it grows in place; ``finish()`` hands it back.
    init(continuing buffer: inout [UInt8]) {
        output = []
        swap(&output, &buffer)
    }

    mutating func key(_ name: StaticString) {
        output.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
        first = false
        output.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { output.append(contentsOf: $0) }
        output.append(UInt8(ascii: "\""))
        output.append(UInt8(ascii: ":"))
    }

    /// A member when `value` is there, its value appended by `write`.
    mutating func member<Value>(_ name: StaticString, _ value: Value?, _ write: (Value, inout [UInt8]) -> Void) {
        guard let value else { return }
        key(name)
        write(value, &output)
    }

    mutating func string(_ name: StaticString, _ value: String?) { member(name, value) { JSONValue.writeString($0, to: &$1) } }
    mutating func value(_ name: StaticString, _ value: JSONValue?) { member(name, value) { $0.write(to: &$1) } }
    mutating func double(_ name: StaticString, _ value: Double?) { member(name, value) { JSONValue.writeDouble($0, to: &$1) } }
    mutating func integer(_ name: StaticString, _ value: Int64?) { member(name, value) { JSONValue.writeInteger($0, to: &$1) } }
    mutating func bool(_ name: StaticString, _ value: Bool?) { member(name, value) { JSONValue.writeLiteral($0 ? "true" : "false", to: &$1) } }

    /// An array whose elements `write` appends.
    mutating func array<Elements: Collection>(_ name: StaticString, _ elements: Elements, _ write: (Elements.Element, inout [UInt8]) -> Void) {
        key(name)
        output.append(UInt8(ascii: "["))
        for (position, element) in elements.enumerated() {
            if position > 0 { output.append(UInt8(ascii: ",")) }
            write(element, &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// Closes the object (`{}` when no member was written) and returns the bytes.
    consuming func finish() -> [UInt8] {
        if first { output.append(UInt8(ascii: "{")) }
        output.append(UInt8(ascii: "}"))
        return output
    }
}
