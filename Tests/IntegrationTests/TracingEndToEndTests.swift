import Foundation
import Kafka
import LiveDispatchCore
import Testing

/// Tracing end to end, as real processes: an embedded Kafka cluster, the
/// APNs simulator, `livedispatch run` with tracing at ratio 1.0, and
/// scripts/otlp-receiver.py decoding what the worker exports with the
/// opentelemetry-proto package.
@Suite("Tracing end to end", .serialized)
struct TracingEndToEndTests {
    static let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    @Test("one event's trace connects its record, its rule, its command, its coalesced push, the APNs answers of its tokens and its snapshot")
    func oneEventsTrace() async throws {
        let stack = try await WorkerStack()
        let receiver = try await OTLPReceiver(in: stack.directory)
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration(extra: """
            tracing:
              enabled: true
              endpoint: \(receiver.endpoint)
              service_name: e2e-worker
              sampling_ratio: 1.0
              export_interval: 100ms
            """))
        let tokens = [token(1, salt: 35), token(2, salt: 35)]
        for pushToken in tokens { try await stack.register(pushToken, for: "match-t1") }
        try await waitFor("the registrations in token-store") {
            try await stack.read("livedispatch.token-store").count >= tokens.count ? true : nil
        }
        try await stack.producer.send(
            topic: "sports.scores", key: Array("t1".utf8),
            value: Array(#"{"type": "kickoff", "match_id": "t1", "home_team": "Owls", "away_team": "Hawks"}"#.utf8),
            headers: [KafkaHeader(key: "traceparent", value: Array(Self.parent.utf8)), KafkaHeader(key: "tracestate", value: Array("vendor=x".utf8))])

        let traceID = "0af7651916cd43dd8448eb211c80319c"
        let spans = try await stack.waitWithDiagnostics("the trace's spans down to both APNs answers", workers: [worker]) { () -> [OTLPReceiver.Span]? in
            let spans = try receiver.spans().filter { $0.trace_id == traceID }
            // The kick-off is a start version; to these update tokens it is sent as an update.
            let answers = spans.filter { $0.name == "APNs update" }
            return answers.count == tokens.count && spans.contains { $0.name == "push start" } && spans.contains { $0.name == "write snapshot" } ? spans : nil
        }
        func one(_ name: String) throws -> OTLPReceiver.Span {
            let named = spans.filter { $0.name == name }
            #expect(named.count == 1, "\(name): \(named.count) spans")
            return try #require(named.first)
        }
        // The record, continuing the trace of its headers.
        let evaluation = try one("evaluate rules")
        #expect(evaluation.parent_span_id == "b7ad6b7169203331")
        #expect(evaluation.kind == "consumer")
        #expect(evaluation.trace_state == "vendor=x")
        #expect(evaluation.attributes["messaging.destination.name"] == .string("sports.scores"))
        #expect(evaluation.attributes["livedispatch.rules"] == .array([.string("kickoff")]))
        #expect(evaluation.resource["service.name"] == .string("e2e-worker"))
        // The rule's command.
        let write = try one("write command")
        #expect(write.parent_span_id == evaluation.span_id)
        #expect(write.kind == "producer")
        #expect(write.attributes["livedispatch.rule"] == .string("kickoff"))
        #expect(write.attributes["activity.id"] == .string("match-t1"))
        // Its time in the coalescing window, and the push that merged it.
        let held = try one("coalesce")
        #expect(held.parent_span_id == write.span_id)
        let push = try one("push start")
        #expect(push.parent_span_id == write.span_id)
        #expect(push.links.map(\.span_id) == [write.span_id])
        #expect(push.attributes["activity.id"] == .string("match-t1"))
        #expect(push.attributes["activity.version"] == .int(1))
        #expect(push.attributes["push.tokens"] == .int(2))
        #expect(push.attributes["push.commands"] == .int(1))
        #expect(held.end <= push.start)
        // The APNs answer of each token, under the push.
        let recorded = Set(stack.pushes().compactMap { $0.headers["apns-id"] })
        #expect(!spans.contains { $0.name == "APNs start" }, "an update token is never sent a start")
        for answer in spans.filter({ $0.name == "APNs update" }) {
            #expect(answer.parent_span_id == push.span_id)
            #expect(answer.kind == "client")
            #expect(answer.status.code == "ok")
            #expect(answer.attributes["http.response.status_code"] == .int(200))
            #expect(answer.attributes["apns.outcome"] == .string("delivered"))
            #expect(answer.attributes["apns.attempt"] == .int(1))
            if case .string(let apnsID) = answer.attributes["apns.id"] {
                #expect(recorded.contains(apnsID))
            } else {
                Issue.record("an APNs span without apns.id: \(answer.attributes)")
            }
            // Within a millisecond: the wall clock dates the push, a
            // monotonic clock times the request.
            #expect(answer.start + 1_000_000 >= push.start && answer.end <= push.end + 1_000_000)
        }
        // The push's snapshot on `state`, under the push, acknowledged after it.
        let snapshot = try one("write snapshot")
        #expect(snapshot.parent_span_id == push.span_id)
        #expect(snapshot.kind == "producer")
        #expect(snapshot.attributes["messaging.destination.name"] == .string("livedispatch.state"))
        #expect(snapshot.attributes["activity.id"] == .string("match-t1"))
        #expect(snapshot.start + 1_000_000 >= push.end)
        // Every span of the trace is one of these, each id once.
        #expect(spans.count == 7)
        #expect(Set(spans.map(\.span_id)).count == spans.count)
        #expect(try await worker.stop() == 0)
        _ = try await receiver.process.stop()
    }
}
