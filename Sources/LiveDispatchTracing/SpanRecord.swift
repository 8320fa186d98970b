import LiveDispatchCore

/// A finished span as the exporter sends it: plain values, no reference to
/// the tracer or the span it came from.
public struct SpanRecord: Sendable, Hashable {
    /// What a span is to the systems around it (OTLP `Span.SpanKind`).
    public enum Kind: Int, Sendable, Hashable {
        case `internal` = 1
        case server = 2
        case client = 3
        case producer = 4
        case consumer = 5
    }

    /// How the span ended (OTLP `Status.StatusCode`).
    public enum Status: Sendable, Hashable {
        case unset
        case ok
        case error(message: String)
    }

    /// One attribute value (OTLP `AnyValue`, without maps and bytes).
    public enum Value: Sendable, Hashable {
        case string(String)
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case array([Value])
    }

    /// Something that happened at an instant of the span.
    public struct Event: Sendable, Hashable {
        public var name: String
        public var nanosecondsSinceEpoch: UInt64
        public var attributes: [Attribute]
    }

    /// A span this one is related to without being its child (a command a
    /// push merged).
    public struct Link: Sendable, Hashable {
        public var context: TraceContext
        public var attributes: [Attribute]

        public init(context: TraceContext, attributes: [Attribute] = []) {
            self.context = context
            self.attributes = attributes
        }
    }

    /// A named value.
    public struct Attribute: Sendable, Hashable {
        public var key: String
        public var value: Value

        public init(_ key: String, _ value: Value) {
            self.key = key
            self.value = value
        }
    }

    /// The span's own context: its trace, its id, the flags and state it carries on.
    public var context: TraceContext
    /// The parent's span id; nil for a root.
    public var parentSpanID: UInt64?
    public var name: String
    public var kind: Kind
    public var startNanoseconds: UInt64
    public var endNanoseconds: UInt64
    public var attributes: [Attribute]
    public var events: [Event]
    public var links: [Link]
    public var status: Status

    public init(
        context: TraceContext, parentSpanID: UInt64?, name: String, kind: Kind, startNanoseconds: UInt64, endNanoseconds: UInt64,
        attributes: [Attribute] = [], events: [Event] = [], links: [Link] = [], status: Status = .unset
    ) {
        self.context = context
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.endNanoseconds = max(startNanoseconds, endNanoseconds)
        self.attributes = attributes
        self.events = events
        self.links = links
        self.status = status
    }
}
