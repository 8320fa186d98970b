/// Where an operation sits in a distributed trace: the W3C trace context of
/// the span that caused it.
///
/// Plain data, so the machines can carry it on a command and hand it back
/// with their actions without knowing anything about tracing; the services
/// around them start spans from it. The all-zero trace id and span id are
/// invalid (W3C), and `init` refuses them.
public struct TraceContext: Sendable, Hashable {
    /// The trace id's high 64 bits (its first 16 hex digits).
    public let traceIDHigh: UInt64
    /// The trace id's low 64 bits.
    public let traceIDLow: UInt64
    /// The id of the span this context points at, the parent of whatever
    /// continues it.
    public let spanID: UInt64
    /// The W3C trace flags; bit 0 says the trace is sampled.
    public let flags: UInt8
    /// The vendor entries of the W3C `tracestate` header, passed on as read
    /// (empty when there is none).
    public let traceState: String

    /// A context, or nil when the trace id or the span id is all zeros.
    public init?(traceIDHigh: UInt64, traceIDLow: UInt64, spanID: UInt64, flags: UInt8, traceState: String = "") {
        guard traceIDHigh | traceIDLow != 0, spanID != 0 else { return nil }
        self.traceIDHigh = traceIDHigh
        self.traceIDLow = traceIDLow
        self.spanID = spanID
        self.flags = flags
        self.traceState = traceState
    }

    /// Whether the trace is recorded: bit 0 of the flags.
    public var isSampled: Bool { flags & 0x01 != 0 }

    /// The same trace and flags with another span as the parent.
    public func withSpanID(_ spanID: UInt64) -> TraceContext? {
        TraceContext(traceIDHigh: traceIDHigh, traceIDLow: traceIDLow, spanID: spanID, flags: flags, traceState: traceState)
    }

    /// The trace id as 32 lowercase hex digits.
    public var traceIDHex: String { Self.hex(traceIDHigh) + Self.hex(traceIDLow) }

    /// The span id as 16 lowercase hex digits.
    public var spanIDHex: String { Self.hex(spanID) }

    /// `value` as 16 lowercase hex digits, zero-padded.
    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
