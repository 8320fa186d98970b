import Instrumentation
import LiveDispatchCore
import Synchronization
import Tracing

/// A span of ``LiveDispatchTracer``. Its changes are kept under a lock
/// until `end`, which hands the finished ``SpanRecord`` to the sink once;
/// a span that is not sampled keeps nothing.
public final class TracedSpan: Tracing.Span, Sendable {
    /// The most attributes, events and links one span keeps; more are dropped.
    static let limit = 128

    private struct Recorded: Sendable {
        var name: String
        var attributes: SpanAttributes = [:]
        var events: [SpanRecord.Event] = []
        var links: [SpanRecord.Link] = []
        var status: SpanRecord.Status = .unset
        var ended = false
    }

    public let context: InstrumentationContext
    /// The span's own W3C context; nil only when the tracer could not make
    /// one, which it always can.
    public let traceContext: TraceContext?
    let parentSpanID: UInt64?
    let kind: SpanRecord.Kind
    let start: UInt64
    private let sink: any SpanSink
    private let recorded: Mutex<Recorded>

    init(
        name: String, context: InstrumentationContext, own: TraceContext?, parentSpanID: UInt64?, kind: SpanRecord.Kind,
        start: UInt64, sink: any SpanSink
    ) {
        self.context = context
        self.traceContext = own
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.start = start
        self.sink = sink
        self.recorded = Mutex(Recorded(name: name))
    }

    public var isRecording: Bool { traceContext?.isSampled ?? false }

    public var operationName: String {
        get { recorded.withLock { $0.name } }
        set { recorded.withLock { $0.name = newValue } }
    }

    public var attributes: SpanAttributes {
        get { recorded.withLock { $0.attributes } }
        set {
            guard isRecording else { return }
            recorded.withLock { $0.attributes = newValue }
        }
    }

    public func setStatus(_ status: SpanStatus) {
        guard isRecording else { return }
        let value: SpanRecord.Status
        switch status.code {
        case .ok: value = .ok
        case .error: value = .error(message: status.message ?? "")
        }
        recorded.withLock { $0.status = value }
    }

    public func addEvent(_ event: SpanEvent) {
        guard isRecording else { return }
        let record = SpanRecord.Event(
            name: event.name, nanosecondsSinceEpoch: event.nanosecondsSinceEpoch, attributes: Self.attributes(event.attributes))
        recorded.withLock { if $0.events.count < Self.limit { $0.events.append(record) } }
    }

    public func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {
        guard isRecording else { return }
        var eventAttributes = attributes
        eventAttributes["exception.message"] = "\(error)"
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: eventAttributes))
        recorded.withLock { if case .unset = $0.status { $0.status = .error(message: "\(error)") } }
    }

    public func addLink(_ link: SpanLink) {
        guard let context = link.context.traceContext else { return }
        addLink(context, attributes: Self.attributes(link.attributes))
    }

    /// Links this span to another span's context.
    public func addLink(_ context: TraceContext, attributes: [SpanRecord.Attribute] = []) {
        guard isRecording else { return }
        recorded.withLock { if $0.links.count < Self.limit { $0.links.append(.init(context: context, attributes: attributes)) } }
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard isRecording, let traceContext else { return }
        let end = instant().nanosecondsSinceEpoch
        guard let finished = recorded.withLock({ recorded -> Recorded? in
            guard !recorded.ended else { return nil }
            recorded.ended = true
            return recorded
        }) else { return }
        sink.record(SpanRecord(
            context: traceContext, parentSpanID: parentSpanID, name: finished.name, kind: kind, startNanoseconds: start,
            endNanoseconds: end, attributes: Self.attributes(finished.attributes), events: finished.events, links: finished.links,
            status: finished.status))
    }

    /// swift-distributed-tracing's attributes as the exporter's, at most ``limit``.
    static func attributes(_ attributes: SpanAttributes) -> [SpanRecord.Attribute] {
        var converted: [SpanRecord.Attribute] = []
        attributes.forEach { key, value in
            if converted.count < limit { converted.append(.init(key, SpanRecord.Value(value))) }
        }
        return converted
    }
}

extension SpanRecord.Value {
    init(_ attribute: SpanAttribute) {
        switch attribute {
        case .int32(let value): self = .int(Int64(value))  // not from a Double: Int32 widened
        case .int64(let value): self = .int(value)
        case .double(let value): self = .double(value)
        case .bool(let value): self = .bool(value)
        case .string(let value): self = .string(value)
        case .int32Array(let values): self = .array(values.map { .int(Int64($0)) })
        case .int64Array(let values): self = .array(values.map { .int($0) })
        case .doubleArray(let values): self = .array(values.map { .double($0) })
        case .boolArray(let values): self = .array(values.map { .bool($0) })
        case .stringArray(let values): self = .array(values.map { .string($0) })
        case .stringConvertible(let value): self = .string(value.description)
        case .stringConvertibleArray(let values): self = .array(values.map { .string($0.description) })
        default: self = .string("\(attribute)")
        }
    }
}
