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
    /// (Braze's two examples use different placeholders for one app);
    /// `changes` replace fields (nil removes one).
    static func update(
        endActivity: Bool, activity: String = activity, appID: String = BrazeExamples.startAppID, _ changes: [String: JSONValue?] = [:]
    ) throws -> String {
        guard case .object(var fields) = try JSONValue.parse(BrazeExamples.update) else { throw TestSetupError("Braze's update example is not an object") }
        fields["activity_id"] = .string(activity)
        fields["app_id"] = .string(appID)
        fields["end_activity"] = .bool(endActivity)
        for (name, value) in changes { fields[name] = value }
        return String(decoding: JSONValue.object(fields).serialized(), as: UTF8.self)
    }

    /// The shipped rules and the type of Braze's start example,
    /// `FootballActivity`: a push-to-start token is taken only for a
    /// declared type.
    static func rulesDeclaringFootball() throws -> String {
        let directory = try TestPaths.temporaryDirectory("rules")
        for name in ["sports.yaml", "delivery.yaml"] {
            try FileManager.default.copyItem(
                at: TestPaths.repositoryRoot.appendingPathComponent("Config/rules/\(name)"), to: directory.appendingPathComponent(name))
        }
        try """
            version: 1
            activity_types:
              FootballActivity:
                attributes:
                  team1Name: string
                  team2Name: string
                content_state:
                  teamOneScore: int
                  teamTwoScore: int
            """.write(to: directory.appendingPathComponent("football.yaml"), atomically: true, encoding: .utf8)
        return directory.path
    }

    /// The `dismissal_date` of Braze's update example, 2023-02-28T00:00:00+0000, in Unix seconds.
    static let exampleDismissal: Int64 = 1_677_542_400

    /// `seconds` as Braze writes dates: ISO-8601 with a `+0000` offset.
    static func brazeDate(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ssZ"
        return formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
    }

    @Test("Braze's start example starts the activity on each named user's push-to-start token; Braze's update example then updates and ends it")
    func startUpdateEnd() async throws {
        let stack = try await WorkerStack()
        let port = try freePort()
        // The worker's one app answers to the Braze app id of the examples.
        let path = try stack.writeConfiguration(adminPort: port, rules: try Self.rulesDeclaringFootball(), extra: IngestAPITests.http())
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

        // The example's dismissal date (2023) has passed: on an update it
        // would end the activity, as Braze documents. The halftime update leaves it out.
        let updated = try httpRequest(
            "POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer,
            body: try Self.update(endActivity: false, ["dismissal_date": nil]))
        #expect(updated.status == 201, "\(updated)")
        _ = try await stack.waitWithDiagnostics("Braze's halftime update on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { device in
                (byToken[device] ?? []).contains { $0.contentState == ["teamOneScore": 2, "teamTwoScore": 4] && $0.aps["alert"]?["title"] == "Halftime" }
            } ? true : nil
        }

        let ended = try httpRequest("POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer, body: try Self.update(endActivity: true))
        #expect(ended.status == 201, "\(ended)")
        let ends = try await stack.waitWithDiagnostics("the end on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { byToken[$0]?.last?.event == "end" } ? byToken : nil
        }
        for updateToken in updateTokens {
            #expect(ends[updateToken]?.last?.aps["dismissal-date"] == .integer(Self.exampleDismissal))
            #expect(ends[updateToken]?.contains { $0.event == "start" } == false, "an update token is never sent a start")
        }
        #expect(stack.pushesByToken().values.joined().filter { $0.event == "start" }.count == devices.count, "one start per push-to-start token")
        #expect(try await stack.deadLetters().isEmpty)
        #expect(try await worker.stop() == 0)
    }

    @Test("Braze's dismissal_date on an update: one already past ends the activity with that date; a future one is kept for the end that gives none")
    func dismissalDateOnUpdate() async throws {
        let stack = try await WorkerStack()
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http())
        let (past, future) = ("braze-past-dismissal", "braze-future-dismissal")
        let devices = [past: [token(41, salt: 34), token(42, salt: 34)], future: [token(43, salt: 34), token(44, salt: 34)]]
        for (activity, tokens) in devices {
            for device in tokens { try await stack.register(device, for: activity) }
        }
        _ = try await stack.waitWithDiagnostics("the update tokens in token-store", workers: [worker]) {
            try await stack.read("livedispatch.token-store").count >= 4 ? true : nil
        }
        func send(_ activity: String, score: Int, endActivity: Bool, dismissal: String?) throws {
            let body = try Self.update(
                endActivity: endActivity, activity: activity, appID: WorkerStack.bundleID,
                ["content_state": ["teamOneScore": .integer(Int64(score)), "teamTwoScore": 0], "dismissal_date": dismissal.map { .string($0) },
                 "stale_date": nil, "notification": nil])
            let answer = try httpRequest("POST", port: port, "/messages/live_activity/update", headers: IngestAPITests.bearer, body: body)
            #expect(answer.status == 201, "\(activity): \(answer)")
        }
        func pushes(_ activity: String) -> [String: [RecordedLine]] {
            stack.pushesByToken().filter { devices[activity]?.contains($0.key) == true }
        }

        // Both activities live on their devices.
        try send(past, score: 1, endActivity: false, dismissal: nil)
        let dismissAt = Int64(Date().timeIntervalSince1970) + 2 * 3600
        try send(future, score: 1, endActivity: false, dismissal: Self.brazeDate(dismissAt))
        _ = try await stack.waitWithDiagnostics("the first update on every device", workers: [worker]) {
            devices.values.joined().allSatisfy { device in
                stack.pushesByToken()[device]?.contains { $0.event == "update" && $0.contentState["teamOneScore"] == 1 } == true
            } ? true : nil
        }

        // A dismissal date already past, without end_activity: the devices get the end, with that date.
        try send(past, score: 2, endActivity: false, dismissal: "2023-02-28T00:00:00+0000")
        let ended = try await stack.waitWithDiagnostics("the end on the past activity's devices", workers: [worker]) {
            let byToken = pushes(past)
            return devices[past]?.allSatisfy { byToken[$0]?.last?.event == "end" } == true ? byToken : nil
        }
        for device in devices[past] ?? [] {
            let end = try #require(ended[device]?.last)
            #expect(ended[device]?.map(\.event) == ["update", "end"], "\(device.prefix(8))")
            #expect(end.aps["dismissal-date"] == .integer(Self.exampleDismissal))
            #expect(end.contentState == ["teamOneScore": 2, "teamTwoScore": 0])
        }

        // An end without a dismissal date ends the other activity with the one its update gave.
        try send(future, score: 3, endActivity: true, dismissal: nil)
        let kept = try await stack.waitWithDiagnostics("the end on the future activity's devices", workers: [worker]) {
            let byToken = pushes(future)
            return devices[future]?.allSatisfy { byToken[$0]?.last?.event == "end" } == true ? byToken : nil
        }
        for device in devices[future] ?? [] {
            let end = try #require(kept[device]?.last)
            #expect(kept[device]?.map(\.event) == ["update", "end"], "\(device.prefix(8))")
            #expect(end.aps["dismissal-date"] == .integer(dismissAt))
            #expect(end.contentState == ["teamOneScore": 3, "teamTwoScore": 0])
        }

        // The activity ended by its past dismissal date takes no more updates.
        try await stack.produce("livedispatch.commands", key: past, #"{"activity_id": "\#(past)", "content_state": {"teamOneScore": 4}}"#)
        let letter = try await stack.waitWithDiagnostics("the late update's dead letter", workers: [worker]) {
            try await stack.deadLetters().first { $0.reason == .activityEnded }
        }
        #expect(letter.activityID?.rawValue == past)
        #expect(!stack.pushes().contains { $0.event == "start" }, "an update token is never sent a start")
        #expect(try await worker.stop() == 0)
        #expect(pushes(past).values.allSatisfy { $0.last?.event == "end" && $0.count == 2 }, "nothing after the end")
    }
}
