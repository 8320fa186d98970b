import Instrumentation
import LiveDispatchCore
import Logging

/// Where the span context lives in an `InstrumentationContext`.
enum TraceContextKey: InstrumentationContextKey {
    typealias Value = TraceContext
    static var nameOverride: String? { "traceparent" }
}

extension InstrumentationContext {
    /// The W3C trace context of the active span, or of the remote parent
    /// an extractor read; nil when there is none.
    public var traceContext: TraceContext? {
        get { self[TraceContextKey.self] }
        set { self[TraceContextKey.self] = newValue }
    }

    /// A top-level context holding `traceContext`.
    public static func with(_ traceContext: TraceContext?) -> InstrumentationContext {
        var context = InstrumentationContext.topLevel
        context.traceContext = traceContext
        return context
    }
}

extension Logger.Metadata {
    /// `trace_id` and `span_id` of `context`, as log processors join logs
    /// to traces; empty for none.
    public static func trace(_ context: TraceContext?) -> Logger.Metadata {
        guard let context else { return [:] }
        return ["trace_id": "\(context.traceIDHex)", "span_id": "\(context.spanIDHex)"]
    }
}

extension Logger.MetadataProvider {
    /// Adds `trace_id` and `span_id` of the task's active span
    /// (`InstrumentationContext.current`) to every log line written under it.
    public static let tracing = Logger.MetadataProvider { .trace(InstrumentationContext.current?.traceContext) }
}
