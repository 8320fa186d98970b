import Foundation
import LiveDispatchCore
import Testing

/// What became of pushes, on the public `outcomes` topic, through
/// `livedispatch run`, Kafka and the APNs simulator.
@Suite("Outcomes end to end", .serialized)
struct OutcomesEndToEndTests {
    static let activity = "order-outcomes"

    @Test("a push's outcome names the command ids it carried and how its sends ended; a token APNs refused is removed with its own outcome")
    func pushAndTokenOutcomes() async throws {
        let gone = String(repeating: "0d", count: 32)
        let stack = try await WorkerStack(partitions: 1, simulatorFlags: ["--unregistered", gone])
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http())
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
        #expect(try await worker.stop() == 0)
    }
}
