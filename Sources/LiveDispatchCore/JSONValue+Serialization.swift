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
            output.append(contentsOf: "null".utf8)
        case .bool(let flag):
            output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .integer(let value):
            output.append(contentsOf: String(value).utf8)
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
            output.append(UInt8(ascii: "{"))
            // Sorted as pairs: no second lookup of each key.
            for (position, field) in fields.sorted(by: { $0.key < $1.key }).enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                JSONValue.writeString(field.key, to: &output)
                output.append(UInt8(ascii: ":"))
                field.value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Writes a double as JSON: integral values of moderate size without a
    /// fraction (`3.0` becomes `3`), others in Swift's shortest round-trip form.
    static func writeDouble(_ value: Double, to output: inout [UInt8]) {
        guard value.isFinite else {
            output.append(contentsOf: "null".utf8)
            return
        }
        if value.rounded(.towardZero) == value, abs(value) < 1e15, let whole = Int64(exactly: value) {
            output.append(contentsOf: String(whole).utf8)
            return
        }
        output.append(contentsOf: value.description.utf8)
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
