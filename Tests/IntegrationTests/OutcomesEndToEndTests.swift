import Foundation
import LiveDispatchCore
import Testing

/// What became of pushes, on the public `outcomes` topic, through
/// `livedispatch run`, Kafka and the APNs simulator.
@Suite("Outcomes end to end", .serialized)
struct OutcomesEndToEndTests {
    static let activity = "order-outcomes"

    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    static func webhooks(_ receiver: WebhookReceiver, timeout: String = "5s") -> String {
        "\nwebhooks:\n  url: http://127.0.0.1:\(receiver.port)/hooks/livedispatch\n  secret: \(secret)\n  timeout: \(timeout)\n"
    }

    @Test("a push's outcome names the command ids it carried and how its sends ended; a token APNs refused is removed with its own outcome; the webhook gets each, signed")
    func pushAndTokenOutcomes() async throws {
        let gone = String(repeating: "0d", count: 32)
        let stack = try await WorkerStack(partitions: 1, simulatorFlags: ["--unregistered", gone])
        let receiver = try await WebhookReceiver(secret: Self.secret)
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http() + Self.webhooks(receiver))
        let device = String(repeating: "d4", count: 32)
        for token in [device, gone] { try await stack.register(token, for: Self.activity) }
        _ = try await waitFor("the registrations on token-store") { () -> Bool? in
            try await stack.read("livedispatch.token-store").count >= 2 ? true : nil
        }
        let update = try httpRequest(
            "POST", port: port, "/v1/activities/\(Self.activity)/update",
            headers: IngestAPITests.bearer.merging(["Idempotency-Key": "order-42-preparing"]) { $1 },
            body: #"{"content_state": {"status": "preparing", "minutesUntilArrival": 20}}"#)
        #expect(update.status == 202, "\(update)")

        let outcomes = try await stack.waitWithDiagnostics("the push and token outcomes", workers: [worker]) { () -> [JSONValue]? in
            let values = try await stack.read("livedispatch.outcomes").compactMap { record in record.value.flatMap { try? JSONValue.parse($0) } }
            let kinds = Set(values.compactMap { $0["kind"]?.stringValue })
            return kinds.isSuperset(of: ["push", "token_removed"]) ? values : nil
        }
        let records = try await stack.read("livedispatch.outcomes")
        #expect(records.allSatisfy { $0.key.map { String(decoding: $0, as: UTF8.self) } == Self.activity }, "keyed by activity id")
        let push = try #require(outcomes.first { $0["kind"] == "push" })
        #expect(push["id"]?.stringValue == "push:\(Self.activity):1")
        #expect(push["activity_id"]?.stringValue == Self.activity)
        #expect(push["event"] == "update" && push["version"] == 1)
        #expect(push["command_ids"] == ["order-42-preparing"])
        #expect(push["delivered"] == 1)
        #expect(push["failed"] == ["Unregistered": 1])
        #expect(push["commands"] == 1)
        let removed = try #require(outcomes.first { $0["kind"] == "token_removed" })
        #expect(removed["token"]?.stringValue == gone)
        #expect(removed["reason"]?.stringValue?.contains("Unregistered") == true, "\(removed)")
        #expect(removed["id"]?.stringValue?.hasPrefix("token-removed:\(Self.activity):\(gone):") == true)
        #expect(Set(outcomes.compactMap { $0["id"]?.stringValue }).count == outcomes.count, "each outcome once")

        // The webhook received the same records, each once, signed.
        let received = try await waitFor("every outcome at the webhook") { () -> [WebhookReceiver.Request]? in
            let requests = try receiver.requests()
            return Set(requests.map(\.id)).count >= outcomes.count ? requests : nil
        }
        #expect(received.count == outcomes.count, "\(received.map(\.id))")
        #expect(received.allSatisfy { $0.signature_valid && $0.content_type == "application/json" })
        let byID = Dictionary(outcomes.compactMap { value in value["id"]?.stringValue.map { ($0, value) } }) { first, _ in first }
        for request in received {
            #expect(try JSONValue.parse(request.body) == byID[request.id], "\(request.id)")
        }
        #expect(try await worker.stop() == 0)
        try await receiver.stop()
    }

    @Test("a webhook receiver that never answers does not slow pushes or outcomes, nor the worker's shutdown")
    func hangingReceiver() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--hang"])
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http() + Self.webhooks(receiver, timeout: "30s"))
        let device = String(repeating: "e5", count: 32)
        try await stack.register(device, for: Self.activity)
        _ = try await waitFor("the registration on token-store") { () -> Bool? in
            try await stack.read("livedispatch.token-store").isEmpty ? nil : true
        }
        for minutes in [30, 25, 20, 15, 10] {
            let update = try httpRequest(
                "POST", port: port, "/v1/activities/\(Self.activity)/update", headers: IngestAPITests.bearer,
                body: #"{"content_state": {"status": "on_the_way", "minutesUntilArrival": \#(minutes)}}"#)
            #expect(update.status == 202, "\(update)")
            _ = try await stack.waitWithDiagnostics("the push of \(minutes) minutes", workers: [worker], timeout: .seconds(20)) {
                stack.pushesByToken()[device]?.last?.contentState["minutesUntilArrival"] == .integer(Int64(minutes)) ? true : nil
            }
        }
        _ = try await waitFor("every push outcome on the topic") { () -> Bool? in
            try await stack.read("livedispatch.outcomes").count >= 5 ? true : nil
        }
        #expect(try receiver.requests().contains { $0.answered == nil }, "the receiver holds requests unanswered")
        let stopped = ContinuousClock.now
        #expect(try await worker.stop() == 0)
        #expect(ContinuousClock.now - stopped < .seconds(25), "shutdown does not wait for the hanging requests' 30 s timeout")
        try await receiver.stop()
    }
}
