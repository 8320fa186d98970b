import Foundation
import LiveDispatchCore
import TestSupport
import Testing

/// Braze's example requests against a real worker (`livedispatch run`), a
/// Kafka cluster process and the APNs simulator over TLS: the start reaches
/// the push-to-start tokens of the users it names, the update and the end
/// reach the update tokens the started devices register.
@Suite("Braze-compatible routes end to end", .serialized)
struct BrazeEndToEndTests {
    static let activity = "football-chiefs-bills-2024-01-21"

    /// Braze's update example for the started activity: its `activity_id`
    /// is the start example's, and `app_id` the start example's app id
    /// (Braze's two examples use different placeholders for one app).
    static func update(endActivity: Bool) throws -> String {
        guard case .object(var fields) = try JSONValue.parse(BrazeExamples.update) else { throw TestSetupError("Braze's update example is not an object") }
        fields["activity_id"] = .string(activity)
        fields["app_id"] = .string(BrazeExamples.startAppID)
        fields["end_activity"] = .bool(endActivity)
        return String(decoding: JSONValue.object(fields).serialized(), as: UTF8.self)
    }

    @Test("Braze's start example starts the activity on each named user's push-to-start token; Braze's update example then updates and ends it")
    func startUpdateEnd() async throws {
        let stack = try await WorkerStack()
        let port = try freePort()
        // The worker's one app answers to the Braze app id of the examples.
        let path = try stack.writeConfiguration(adminPort: port, extra: IngestAPITests.http())
        let written = try String(contentsOfFile: path, encoding: .utf8)
        let configured = written.replacingOccurrences(of: "apns:\n", with: "apns:\n  braze_app_id: \"\(BrazeExamples.startAppID)\"\n")
        #expect(configured != written)
        try configured.write(toFile: path, atomically: true, encoding: .utf8)
        let worker = try await stack.startWorker(configuration: path)

        // Each user's device registers its push-to-start token in the user's audience.
        let devices = Dictionary(uniqueKeysWithValues: BrazeExamples.startAudiences.enumerated().map { ($0.element, token($0.offset + 1, salt: 34)) })
        for (audience, device) in devices {
            let body = #"{"kind": "push_to_start", "audience": "\#(audience)", "attributes_type": "FootballActivity", "token": "\#(device)"}"#
            #expect(try httpRequest("POST", port: port, "/v1/tokens", headers: IngestAPITests.bearer, body: body).status == 202)
        }
        _ = try await stack.waitWithDiagnostics("the push-to-start tokens in token-store", workers: [worker]) {
            try await stack.read("livedispatch.token-store").count >= devices.count ? true : nil
        }

        let started = try httpRequest("POST", port: port, "/messages/live_activity/start", headers: IngestAPITests.bearer, body: BrazeExamples.start)
        #expect(started.status == 201, "\(started)")
        #expect(try JSONValue.parse(started.body) == ["message": "success"])
        let starts = try await stack.waitWithDiagnostics("the start on each user's push-to-start token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return devices.values.allSatisfy { byToken[$0]?.isEmpty == false } ? byToken : nil
        }
        for device in devices.values {
            let push = try #require(starts[device]?.first)
            #expect(push.event == "start")
            #expect(push.aps["attributes-type"] == "FootballActivity")
            #expect(push.aps["attributes"]?["team1Name"] == "Chiefs")
            #expect(push.aps["alert"]?["title"] == "Chiefs v. Bills")
            #expect(push.aps["input-push-token"] == 1)
            #expect(push.contentState == ["teamOneScore": 0, "teamTwoScore": 0])
        }

        // The started devices report their update tokens under the activity id.
        let updateTokens = [token(11, salt: 34), token(12, salt: 34)]
        for updateToken in updateTokens { try await stack.register(updateToken, for: Self.activity) }
        _ = try await stack.waitWithDiagnostics("the current state on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { byToken[$0]?.first?.event == "update" } ? true : nil
        }

        let updated = try httpRequest("POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer, body: try Self.update(endActivity: false))
        #expect(updated.status == 201, "\(updated)")
        _ = try await stack.waitWithDiagnostics("Braze's halftime update on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { device in
                (byToken[device] ?? []).contains { $0.contentState == ["teamOneScore": 2, "teamTwoScore": 4] && $0.aps["alert"]?["title"] == "Halftime" }
            } ? true : nil
        }

        let ended = try httpRequest("POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer, body: try Self.update(endActivity: true))
        #expect(ended.status == 201, "\(ended)")
        _ = try await stack.waitWithDiagnostics("the end on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { byToken[$0]?.last?.event == "end" } ? true : nil
        }
        #expect(stack.pushesByToken().values.joined().filter { $0.event == "start" }.count == devices.count, "one start per push-to-start token")
        #expect(try await stack.deadLetters().isEmpty)
        #expect(try await worker.stop() == 0)
    }
}
