import Foundation
import LiveDispatchCore
import Testing

/// Commands that do not fit their activity's type, from HTTP and from the
/// `commands` topic, through `livedispatch run`, Kafka and the APNs
/// simulator: refused with the field's path, and never sent.
@Suite("Typed activities end to end", .serialized)
struct TypedActivitiesEndToEndTests {
    static let activity = "match-typed"

    @Test("a misspelled content-state field is refused over HTTP (422) and from commands (dead letter), with its path; only fitting pushes reach the device")
    func misspelledFieldsAreNeverSent() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http())
        let device = String(repeating: "c3", count: 32)
        try await stack.register(device, for: Self.activity)
        _ = try await waitFor("the registration on token-store") { () -> Bool? in
            try await stack.read("livedispatch.token-store").contains { String(decoding: $0.value ?? [], as: UTF8.self).contains(device) } ? true : nil
        }
        let path = "/v1/activities/\(Self.activity)"
        let start = try httpRequest("POST", port: port, "\(path)/start", headers: IngestAPITests.bearer, body: #"""
            {"attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"},
             "notification": {"alert": {"title": "Kick-off", "body": "Owls v Hawks"}},
             "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}}
            """#)
        #expect(start.status == 202, "\(start)")
        // The device's token is an update token: the start reaches it as an update.
        let started = try await stack.waitWithDiagnostics("the start's state on the device", workers: [worker]) { stack.pushesByToken()[device]?.first }
        #expect(started.event == "update")
        #expect(started.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"])
        #expect(started.aps["alert"]?["title"] == "Kick-off" && started.aps["attributes"] == nil)

        // Over HTTP: this worker owns the partition, so the update is checked merged into the state.
        let refused = try httpRequest("POST", port: port, "\(path)/update", headers: IngestAPITests.bearer, body: #"{"content_state": {"teamOneScroe": 1}}"#)
        #expect(refused.status == 422, "\(refused)")
        let answer = try JSONValue.parse(refused.body)
        #expect(answer["error"] == "content-state-mismatch")
        #expect(try IngestAPITests.problems(refused) == ["/content_state/teamOneScroe"])

        // A Braze-shaped update is checked the same way, and refused in Braze's shape.
        let braze = try httpRequest("POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer, body: #"""
            {"app_id": "\#(WorkerStack.bundleID)", "activity_id": "\#(Self.activity)", "content_state": {"teamTwoScroe": 1}, "end_activity": false}
            """#)
        #expect(braze.status == 422, "\(braze)")
        let brazeAnswer = try JSONValue.parse(braze.body)
        #expect(brazeAnswer["errors"]?.arrayValue?.first?["pointer"] == "/content_state/teamTwoScroe", "\(braze.body)")
        #expect(brazeAnswer["message"]?.stringValue?.contains("SportsActivityAttributes") == true, "\(braze.body)")

        // From the topic: dead-lettered with the path and the type.
        try await stack.produce("livedispatch.commands", key: Self.activity, #"{"activity_id": "\#(Self.activity)", "content_state": {"teamTwoScore": "one"}}"#)
        let letter = try await stack.waitWithDiagnostics("the dead letter of the mistyped command", workers: [worker]) {
            try await stack.deadLetters().first { $0.reason == .contentStateMismatch }
        }
        #expect(letter.details["path"] == "content_state.teamTwoScore")
        #expect(letter.details["type"] == "SportsActivityAttributes")
        #expect(letter.activityID?.rawValue == Self.activity)
        #expect(letter.origin?.topic == "livedispatch.commands", "replayable once fixed")

        // A fitting update goes out, carrying none of the refused fields.
        let fits = try httpRequest("POST", port: port, "\(path)/update", headers: IngestAPITests.bearer, body: #"{"content_state": {"teamOneScore": 1, "minute": 12}}"#)
        #expect(fits.status == 202, "\(fits)")
        let pushes = try await stack.waitWithDiagnostics("the fitting update on the device", workers: [worker]) { () -> [RecordedLine]? in
            let received = stack.pushesByToken()[device] ?? []
            return received.count >= 2 ? received : nil
        }
        #expect(pushes.map(\.event) == ["update", "update"])
        #expect(pushes[1].contentState == ["teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "minute": 12])
        #expect(try await worker.stop() == 0)
        #expect(stack.pushesByToken()[device]?.count == 2, "nothing else was sent")
    }
}
