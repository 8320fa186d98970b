import HTTPTypes
import Hummingbird
import LiveDispatchCore
import LiveDispatchTracing
import Tracing

/// A server span for each request to the API (`/v1/…`), continuing the
/// trace of its `traceparent` and `tracestate` headers. The handler runs
/// with the span as the task's context, so the records it writes carry the
/// trace on (``WorkerHTTPServer``'s `produce`). Health, metrics and the
/// console are not traced.
struct TracingMiddleware<Context: RequestContext>: RouterMiddleware {
    let tracer: LiveDispatchTracer

    static var traceparent: HTTPField.Name? { HTTPField.Name(TraceContext.traceparentHeader) }
    static var tracestate: HTTPField.Name? { HTTPField.Name(TraceContext.tracestateHeader) }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix("/v1/") else { return try await next(request, context) }
        let parent = Self.traceparent.flatMap { request.headers[$0] }.flatMap { traceparent in
            TraceContext(traceparent: traceparent, tracestate: Self.tracestate.flatMap { request.headers[$0] })
        }
        let span = tracer.startSpan("\(request.method.rawValue) /v1", context: .with(parent), ofKind: .server)
        defer { span.end() }
        if span.isRecording {
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["url.path"] = request.uri.path
        }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) { try await next(request, context) }
            span.attributes["http.response.status_code"] = response.status.code
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            span.recordError(error)
            throw error
        }
    }
}
