import Instrumentation
import LiveDispatchCore
import Synchronization
import Tracing

/// The worker's `Tracer`: W3C trace context, parent-based sampling with a
/// trace-id ratio, and finished spans handed to a ``SpanSink`` (the OTLP
/// exporter's queue) without waiting.
///
/// A span that is not sampled still has a context, so its children and
/// the records it writes carry the trace on with the sampled flag off; it
/// records nothing and costs no export.
public final class LiveDispatchTracer: Tracer, Sendable {
    public typealias Span = TracedSpan

    public let sampler: TraceSampler
    let sink: any SpanSink
    private let random: Mutex<SplitMix64>

    public init(sampler: TraceSampler, sink: any SpanSink, seed: UInt64? = nil) {
        self.sampler = sampler
        self.sink = sink
        self.random = Mutex(seed.map(SplitMix64.init(seed:)) ?? SplitMix64())
    }

    /// A non-zero random id.
    func nextID() -> UInt64 {
        random.withLock { random in
            var id = random.next()
            while id == 0 { id = random.next() }
            return id
        }
    }

    /// A new span's context under `parent` (a new trace when nil): its own
    /// id (`spanID`, or a random one), the parent's trace, and the
    /// sampler's decision in the flags.
    public func childContext(of parent: TraceContext?, spanID: UInt64? = nil) -> TraceContext? {
        let high = parent?.traceIDHigh ?? nextID()
        let low = parent?.traceIDLow ?? nextID()
        let sampled = sampler.isSampled(traceIDLow: low, parent: parent)
        let flags = (parent?.flags ?? 0) & ~0x01 | (sampled ? 0x01 : 0)
        return TraceContext(
            traceIDHigh: high, traceIDLow: low, spanID: spanID ?? nextID(), flags: flags, traceState: parent?.traceState ?? "")
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> TracedSpan {
        var spanContext = context()
        let parent = spanContext.traceContext
        let own = childContext(of: parent)
        spanContext.traceContext = own
        return TracedSpan(
            name: operationName, context: spanContext, own: own, parentSpanID: parent?.spanID, kind: SpanRecord.Kind(kind),
            start: instant().nanosecondsSinceEpoch, sink: sink)
    }

    /// A span under `parent` starting at `start` (nanoseconds since the
    /// epoch), with an id chosen by the caller when given: a push's APNs
    /// requests name the push span's id, derived from the push, as their
    /// parent before the push span is recorded.
    public func startSpan(
        _ operationName: String, parent: TraceContext?, spanID: UInt64? = nil, kind: SpanRecord.Kind, at start: UInt64
    ) -> TracedSpan {
        let own = childContext(of: parent, spanID: spanID)
        return TracedSpan(
            name: operationName, context: .with(own), own: own, parentSpanID: parent?.spanID, kind: kind, start: start, sink: sink)
    }

    public func forceFlush() { sink.flush() }

    public func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let traceparent = extractor.extract(key: TraceContext.traceparentHeader, from: carrier) else { return }
        let tracestate = extractor.extract(key: TraceContext.tracestateHeader, from: carrier)
        if let parent = TraceContext(traceparent: traceparent, tracestate: tracestate) { context.traceContext = parent }
    }

    public func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let trace = context.traceContext else { return }
        for header in trace.headers { injector.inject(header.value, forKey: header.name, into: &carrier) }
    }
}

/// Where finished spans go: it must take them without blocking.
public protocol SpanSink: Sendable {
    /// Takes a finished, sampled span (or drops and counts it when full).
    func record(_ span: SpanRecord)
    /// Asks for what is queued to be sent soon.
    func flush()
}

/// An instant as nanoseconds since the Unix epoch, for spans whose times
/// were taken earlier (a command's time in the coalescing window).
public struct EpochInstant: TracerInstant {
    public var nanosecondsSinceEpoch: UInt64

    public init(nanosecondsSinceEpoch: UInt64) { self.nanosecondsSinceEpoch = nanosecondsSinceEpoch }

    /// `time` as an instant; a time before the epoch or past what 64 bits
    /// of nanoseconds hold is clamped.
    public init(_ time: UnixTime) {
        let nanoseconds = (time.seconds * 1e9).rounded()
        nanosecondsSinceEpoch = nanoseconds.isNaN || nanoseconds <= 0 ? 0 : UInt64(exactly: nanoseconds) ?? .max
    }

    public static func < (lhs: EpochInstant, rhs: EpochInstant) -> Bool { lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch }
}

extension SpanRecord.Kind {
    init(_ kind: SpanKind) {
        switch kind {
        case .server: self = .server
        case .client: self = .client
        case .producer: self = .producer
        case .consumer: self = .consumer
        case .internal: self = .internal
        }
    }
}
