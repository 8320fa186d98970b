import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveDispatchCore
import LiveDispatchTracing
import Synchronization
import Testing

/// Collects finished spans in memory.
final class CollectedSpans: SpanSink {
    let spans = Mutex<[SpanRecord]>([])
    func record(_ span: SpanRecord) { spans.withLock { $0.append(span) } }
    func flush() {}
}

@Suite("Tracing the API")
struct TracingMiddlewareTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a request's traceparent is continued by a server span, whose context the records it writes carry")
    func continued() async throws {
        let sink = CollectedSpans()
        let server = try InProcessServer(tracer: LiveDispatchTracer(sampler: .always, sink: sink, seed: 35))
        let update = ByteBuffer(string: #"{"content_state":{"score":"1-0"}}"#)
        let traceparent = try #require(HTTPField.Name("traceparent"))
        let tracestate = try #require(HTTPField.Name("tracestate"))
        try await server.application.test(.router) { client in
            var headers = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]
            headers[traceparent] = Self.parent
            headers[tracestate] = "vendor=1"
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: headers, body: update) { response in
                #expect(response.status == .accepted)
            }
            // Without one, a new trace; a malformed one is ignored the same way.
            var malformed = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]
            malformed[traceparent] = "00-zz-00f067aa0ba902b7-01"
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: malformed, body: update) { response in
                #expect(response.status == .accepted)
            }
            try await client.execute(uri: "/healthz", method: .get) { response in #expect(response.status == .ok) }
        }
        let spans = sink.spans.withLock { $0 }
        #expect(spans.count == 2, "one server span per API request, none for /healthz")
        let traces = server.recorder.producedTraces.withLock { $0 }
        #expect(traces.count == 2)
        let continued = try #require(spans.first)
        #expect(continued.kind == .server)
        #expect(continued.context.traceIDHex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(continued.parentSpanID == 0x00f0_67aa_0ba9_02b7)
        #expect(continued.context.traceState == "vendor=1")
        #expect(continued.attributes.contains(.init("http.response.status_code", .int(202))))
        #expect(traces.first == continued.context, "the record carries the server span's context")
        let root = try #require(spans.last)
        #expect(root.parentSpanID == nil)
        #expect(root.context.traceIDHex != continued.context.traceIDHex)
        #expect(traces.last == root.context)
    }
}
