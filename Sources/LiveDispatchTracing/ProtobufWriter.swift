/// Writes the protobuf wire format (https://protobuf.dev/programming-guides/encoding/):
/// the few field types an OTLP export needs.
///
/// Nested messages are written into a writer of their own and appended as
/// length-delimited bytes; the sizes involved (a batch of spans) keep that
/// copy small.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    /// The wire types used: varint, 64-bit, length-delimited and 32-bit.
    enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    mutating func varint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: rest))
    }

    mutating func tag(_ field: UInt32, _ type: WireType) {
        varint(UInt64(field) << 3 | UInt64(type.rawValue))
    }

    /// A varint field; proto3 leaves out a zero.
    mutating func uint64(_ field: UInt32, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .varint)
        varint(value)
    }

    /// An `int64` field: a negative number is its two's complement, ten bytes.
    mutating func int64(_ field: UInt32, _ value: Int64) {
        uint64(field, UInt64(bitPattern: value))
    }

    /// A `bool` field, written even when false when `always` (a `oneof`
    /// member must be present to say which one it is).
    mutating func bool(_ field: UInt32, _ value: Bool, always: Bool = false) {
        guard value || always else { return }
        tag(field, .varint)
        varint(value ? 1 : 0)
    }

    mutating func fixed64(_ field: UInt32, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .fixed64)
        littleEndian(value, count: 8)
    }

    mutating func fixed32(_ field: UInt32, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, .fixed32)
        littleEndian(UInt64(value), count: 4)  // not from a Double: UInt32 widened
    }

    /// A `double` field, written even when 0 when `always` (a `oneof` member).
    mutating func double(_ field: UInt32, _ value: Double, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(field, .fixed64)
        littleEndian(value.bitPattern, count: 8)
    }

    /// A `bytes` or embedded-message field; empty ones are left out unless `always`.
    mutating func lengthDelimited(_ field: UInt32, _ value: [UInt8], always: Bool = false) {
        guard !value.isEmpty || always else { return }
        tag(field, .lengthDelimited)
        varint(UInt64(value.count))  // not from a Double: a count, 0 or more
        bytes.append(contentsOf: value)
    }

    mutating func string(_ field: UInt32, _ value: String, always: Bool = false) {
        lengthDelimited(field, Array(value.utf8), always: always)
    }

    /// An embedded message written by `body`; present even when empty.
    mutating func message(_ field: UInt32, _ body: (inout ProtobufWriter) -> Void) {
        var nested = ProtobufWriter()
        body(&nested)
        lengthDelimited(field, nested.bytes, always: true)
    }

    private mutating func littleEndian(_ value: UInt64, count: Int) {
        for index in 0..<count { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }
}
