/// Reading and writing the W3C Trace Context headers `traceparent` and
/// `tracestate` (https://www.w3.org/TR/trace-context/).
///
/// Every byte comes from outside (a Kafka header, an HTTP request), so the
/// reader takes raw bytes and answers nil for anything it does not accept;
/// it never traps.
extension TraceContext {
    /// The `traceparent` header's name.
    public static let traceparentHeader = "traceparent"
    /// The `tracestate` header's name.
    public static let tracestateHeader = "tracestate"
    /// The longest `tracestate` kept: W3C allows 32 entries of at most 256
    /// bytes each, and a system may drop a longer header.
    public static let maximumTraceStateLength = 512

    /// Reads a `traceparent` header value (and the `tracestate` beside it).
    ///
    /// Version `00` must be exactly 55 bytes; a later version may append
    /// fields after a dash, which are ignored, as W3C asks. Version `ff`,
    /// uppercase hex, all-zero ids and any other byte out of place are
    /// refused. A `tracestate` that is too long, or has bytes outside
    /// printable ASCII, is dropped while the parent is kept.
    public init?<Bytes: Collection<UInt8>>(traceparent: Bytes, tracestate: Bytes? = nil) {
        guard traceparent.count <= Self.longestTraceparentRead else { return nil }
        let bytes = Array(traceparent)
        guard bytes.count >= 55,
              let version = Self.hexValue(bytes[0..<2]), version != 0xFF,
              bytes[2] == Self.dash, bytes[35] == Self.dash, bytes[52] == Self.dash,
              let high = Self.hexValue(bytes[3..<19]),
              let low = Self.hexValue(bytes[19..<35]),
              let span = Self.hexValue(bytes[36..<52]),
              let flags = Self.hexValue(bytes[53..<55])
        else { return nil }
        if version == 0 {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == Self.dash else { return nil }
        }
        self.init(
            traceIDHigh: high,
            traceIDLow: low,
            spanID: span,
            flags: UInt8(truncatingIfNeeded: flags),
            traceState: tracestate.flatMap(Self.acceptedTraceState) ?? ""
        )
    }

    /// Reads the headers from strings, as HTTP frameworks hand them over.
    public init?(traceparent: String, tracestate: String?) {
        self.init(traceparent: Array(traceparent.utf8), tracestate: tracestate.map { Array($0.utf8) })
    }

    /// The `traceparent` header value: version 00, this context's ids and
    /// flags.
    public var traceparent: String {
        "00-\(traceIDHex)-\(spanIDHex)-\(Self.hexByte(flags))"
    }

    /// The headers that carry this context on, `tracestate` only when there
    /// is one.
    public var headers: [(name: String, value: String)] {
        var headers = [(name: Self.traceparentHeader, value: traceparent)]
        if !traceState.isEmpty { headers.append((name: Self.tracestateHeader, value: traceState)) }
        return headers
    }

    /// The longest `traceparent` read (a later version may be longer than
    /// 55 bytes); a longer header is refused rather than copied.
    static let longestTraceparentRead = 512
    static let dash = UInt8(ascii: "-")

    /// The value of lowercase hex digits (at most 16), or nil for any other
    /// byte.
    static func hexValue(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// A `tracestate` value kept as it is, or nil when it is too long or
    /// holds a byte outside printable ASCII (space and tab included, as
    /// W3C's optional whitespace).
    static func acceptedTraceState<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String? {
        guard bytes.count <= maximumTraceStateLength,
              bytes.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x09 })
        else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        let trimmed = text.trimmingWhitespace
        return trimmed.isEmpty ? nil : trimmed
    }

    static func hexByte(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    fileprivate var trimmingWhitespace: String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }),
              let last = lastIndex(where: { !isBlank($0) })
        else { return "" }
        return String(self[first...last])
    }
}
