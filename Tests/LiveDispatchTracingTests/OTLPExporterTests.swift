import Foundation
import LiveDispatchCore
import Logging
import MetricsTestKit
import Testing
import TestSupport
import Tracing

@testable import LiveDispatchTracing

@Suite struct OTLPExporterTests {
    static func exporter(port: Int, queueSize: Int = 64, metrics: TestMetrics = TestMetrics()) throws -> OTLPExporter {
        let endpoint = try #require(OTLPHTTPClient.Endpoint(url: "http://127.0.0.1:\(port)/v1/traces"))
        return OTLPExporter(
            client: OTLPHTTPClient(endpoint: endpoint, timeout: .seconds(5)), resource: [.init("service.name", .string("tests"))],
            limits: .init(queueSize: queueSize, batchSize: 16), logger: Logger(label: "otlp-tests"), metrics: metrics)
    }

    @Test func aFullQueueDropsAndCountsAndAFailedExportIsCountedToo() async throws {
        let metrics = TestMetrics()
        let exporter = try Self.exporter(port: try freePort(), queueSize: 3, metrics: metrics)
        let tracer = LiveDispatchTracer(sampler: .always, sink: exporter, seed: 1)
        for index in 0..<5 { tracer.withSpan("span \(index)") { _ in } }
        #expect(exporter.queued == 3)
        #expect(try metrics.expectCounter("livedispatch_trace_spans_dropped_total", [("reason", "queue_full")]).totalValue == 2)
        // Nothing listens on the port: the batch is dropped, never retried.
        await exporter.exportQueued()
        #expect(exporter.queued == 0)
        #expect(try metrics.expectCounter("livedispatch_trace_spans_dropped_total", [("reason", "export_failed")]).totalValue == 3)
    }

    @Test func unsampledSpansAreNeverQueued() throws {
        let exporter = try Self.exporter(port: try freePort())
        let tracer = LiveDispatchTracer(sampler: .never, sink: exporter, seed: 2)
        tracer.withSpan("root") { root in
            #expect(!root.isRecording)
            // The child carries the trace on, unsampled.
            let child = tracer.startSpan("child", context: root.context)
            #expect(child.traceContext?.traceIDLow == root.traceContext?.traceIDLow)
            #expect(child.traceContext?.isSampled == false)
            child.end()
        }
        #expect(exporter.queued == 0)
    }

    @Test func whatTheExporterSendsTheOpenTelemetryDecoderReads() async throws {
        let directory = try TestPaths.temporaryDirectory("otlp-exporter")
        let receiver = try await OTLPReceiver(in: directory)
        let metrics = TestMetrics()
        let exporter = try Self.exporter(port: receiver.port, metrics: metrics)
        let tracer = LiveDispatchTracer(sampler: .always, sink: exporter, seed: 3)
        let remote = try #require(TraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "rojo=1"))
        let linked = try #require(TraceContext(traceIDHigh: 7, traceIDLow: 8, spanID: 9, flags: 1))
        let parent = tracer.startSpan("parent", context: .with(remote), ofKind: .consumer, at: EpochInstant(nanosecondsSinceEpoch: 1_000))
        parent.attributes["text"] = "é ✓"
        parent.attributes["count"] = -42
        parent.attributes["ratio"] = 0.5
        parent.attributes["flag"] = false
        parent.attributes["names"] = ["a", "b"]
        parent.addLink(linked, attributes: [.init("messaging.kafka.offset", .int(12))])
        let child = tracer.startSpan("child", context: parent.context, ofKind: .client, at: EpochInstant(nanosecondsSinceEpoch: 2_000))
        child.setStatus(.init(code: .error, message: "410 Unregistered"))
        child.end(at: EpochInstant(nanosecondsSinceEpoch: 3_000))
        parent.end(at: EpochInstant(nanosecondsSinceEpoch: 4_000))
        await exporter.exportQueued()
        #expect(try metrics.expectCounter("livedispatch_trace_spans_exported_total").totalValue == 2)

        let spans = try await waitFor("two decoded spans") { () -> [OTLPReceiver.Span]? in
            let spans = try receiver.spans()
            return spans.count == 2 ? spans : nil
        }
        let decodedParent = try #require(spans.first { $0.name == "parent" })
        let decodedChild = try #require(spans.first { $0.name == "child" })
        #expect(decodedParent.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(decodedParent.parent_span_id == "00f067aa0ba902b7")
        #expect(decodedParent.span_id == parent.traceContext?.spanIDHex)
        #expect(decodedParent.trace_state == "rojo=1")
        #expect(decodedParent.kind == "consumer")
        #expect(decodedParent.start == 1_000 && decodedParent.end == 4_000)
        #expect(decodedParent.flags == 1)
        #expect(decodedParent.attributes == [
            "text": .string("é ✓"), "count": .int(-42), "ratio": .double(0.5), "flag": .bool(false), "names": .array([.string("a"), .string("b")]),
        ])
        #expect(decodedParent.links.map(\.span_id) == ["0000000000000009"])
        #expect(decodedParent.links.first?.trace_id == "00000000000000070000000000000008")
        #expect(decodedParent.resource == ["service.name": .string("tests")])
        #expect(decodedParent.scope == "livedispatch")
        #expect(decodedChild.parent_span_id == decodedParent.span_id)
        #expect(decodedChild.trace_id == decodedParent.trace_id)
        #expect(decodedChild.kind == "client")
        #expect(decodedChild.status.code == "error" && decodedChild.status.message == "410 Unregistered")
        _ = try await receiver.process.stop()
    }

    @Test(arguments: [
        ("http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector/v1/traces", "http://collector:80/v1/traces"),
        ("HTTP://[::1]:4318", "http://[::1]:4318/"),
    ])
    func endpointsAreRead(_ url: String, _ described: String) throws {
        #expect(try #require(OTLPHTTPClient.Endpoint(url: url)).description == described)
    }

    @Test(arguments: [
        "", "https://collector:4318/v1/traces", "http://", "http://:4318", "http://host:0/", "http://host:65536/",
        "http://host:port/", "http://user@host/", "http://host/v1/traces?x=1", "http://ho st/", "http://host/v1 traces",
        "grpc://host:4317",
    ])
    func badEndpointsAreRefused(_ url: String) {
        #expect(OTLPHTTPClient.Endpoint(url: url) == nil)
    }
}
