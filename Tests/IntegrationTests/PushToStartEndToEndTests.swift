import Foundation
import Kafka
import LiveDispatchCore
import Testing

/// Push-to-start audiences end to end, as real processes: an embedded Kafka
/// cluster process, the APNs simulator process over TLS and `livedispatch run`.
@Suite("Push-to-start end to end", .serialized)
struct PushToStartEndToEndTests {
    static let audience = "followers:e2e-owls"
    static let activity = "match-p2s"

    func registerPushToStart(_ stack: WorkerStack, _ pushToken: String, audience: String = audience, type: String = "SportsActivityAttributes") async throws {
        try await stack.produce("livedispatch.tokens", key: audience, #"{"kind": "push_to_start", "audience": "\#(audience)", "attributes_type": "\#(type)", "token": "\#(pushToken)"}"#)
    }

    func start(score: Int) -> String {
        #"{"activity_id": "\#(Self.activity)", "event": "start", "audiences": ["\#(Self.audience)"], "content_state": {"teamOneScore": \#(score), "teamTwoScore": 0, "period": "first_half"}, "attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"}, "alert": {"title": "Owls v Hawks", "body": "Kick-off"}}"#
    }

    func alreadyStarted(_ stack: WorkerStack, port: Int) throws -> Double {
        WorkerStack.counter("livedispatch_audience_starts_total", labels: "outcome=\"already-started\"", in: try stack.metrics(port: port))
    }

    @Test("a device's new push-to-start token replaces its old one: the old one's record is removed, a start reaches only the new one, and the audience route shows it with its start")
    func deviceReplacesItsToken() async throws {
        let stack = try await WorkerStack()
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http())
        let (old, new) = (token(21, salt: 7), token(22, salt: 7))
        for pushToken in [old, new] {
            try await stack.produce(
                "livedispatch.tokens", key: Self.audience,
                #"{"kind": "push_to_start", "audience": "\#(Self.audience)", "attributes_type": "SportsActivityAttributes", "token": "\#(pushToken)", "device": "phone-1"}"#)
        }
        let oldKey = "\(Self.audience)\u{1E}\(old)"
        _ = try await stack.waitWithDiagnostics("the old token's tombstone in token-store", workers: [worker]) {
            try await stack.read("livedispatch.token-store").contains { $0.key == Array(oldKey.utf8) && $0.value == nil } ? true : nil
        }
        try await stack.produce("livedispatch.commands", key: Self.activity, start(score: 0))
        _ = try await stack.waitWithDiagnostics("the start to the new token", workers: [worker]) {
            stack.pushesByToken()[new]?.first { $0.event == "start" }
        }
        #expect(stack.pushesByToken()[old] == nil)

        let reader = ["Authorization": "Bearer \(IngestAPITests.readKey)"]
        let path = "/v1/audiences/\(Self.audience.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/", ":"])) ?? "")"
        let view = try await waitFor("the new token's start in GET /v1/audiences") { () -> JSONValue? in
            let answer = try httpRequest("GET", port: port, path, headers: reader)
            guard answer.status == 200, let view = try? JSONValue.parse(answer.body) else { return nil }
            return view["items"]?.arrayValue?.first?["starts"]?.arrayValue?.isEmpty == false ? view : nil
        }
        #expect(view["audience"] == .string(Self.audience) && view["count"] == 1)
        let item = try #require(view["items"]?.arrayValue?.first)
        #expect(item["token"] == .string(new) && item["device"] == "phone-1" && item["attributes_type"] == "SportsActivityAttributes")
        #expect(item["starts"]?.arrayValue?.first?["activity_id"] == .string(Self.activity))
        #expect(try httpRequest("GET", port: port, "/v1/audiences/nobody", headers: reader).status == 404)
        #expect(try await worker.stop() == 0)
    }

    @Test("a start to an audience reaches each push-to-start token once with input-push-token; the update tokens the devices register get the updates; neither a repeat nor a re-delivery starts them again")
    func audienceStart() async throws {
        let stack = try await WorkerStack()
        let adminPort = try freePort()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration(adminPort: adminPort))
        let fans = [token(1, salt: 7), token(2, salt: 7)]
        let otherType = token(3, salt: 7)
        let otherAudience = token(4, salt: 7)
        for fan in fans { try await registerPushToStart(stack, fan) }
        try await registerPushToStart(stack, otherType, type: "DeliveryActivityAttributes")
        try await registerPushToStart(stack, otherAudience, audience: "followers:e2e-hawks")
        _ = try await waitFor("the push-to-start tokens in token-store") {
            try await stack.read("livedispatch.token-store").count >= 4 ? true : nil
        }

        try await stack.produce("livedispatch.commands", key: Self.activity, start(score: 0))
        let started = try await stack.waitWithDiagnostics("a start to each fan", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return fans.allSatisfy { byToken[$0]?.isEmpty == false } ? byToken : nil
        }
        for fan in fans {
            let pushes = started[fan] ?? []
            #expect(pushes.count == 1)
            let push = try #require(pushes.first)
            #expect(push.event == "start")
            #expect(push.aps["input-push-token"] == 1)
            #expect(push.aps["attributes-type"] == "SportsActivityAttributes")
            #expect(push.aps["attributes"]?["teamOneName"] == "Owls")
            #expect(push.aps["alert"]?["title"] == "Owls v Hawks")
            #expect(push.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"])
            #expect(push.headers[":path"] == "/3/device/\(fan)")
            #expect(push.headers["apns-topic"] == "com.example.livedispatch.push-type.liveactivity")
        }

        // The started devices report their new update tokens under the activity id.
        let updateTokens = [token(11, salt: 7), token(12, salt: 7)]
        for updateToken in updateTokens { try await stack.register(updateToken, for: Self.activity) }
        _ = try await stack.waitWithDiagnostics("the current state on each new update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { byToken[$0]?.first?.event == "update" } ? true : nil
        }
        try await stack.produce("livedispatch.commands", key: Self.activity, #"{"activity_id": "\#(Self.activity)", "content_state": {"teamOneScore": 1}}"#)
        _ = try await stack.waitWithDiagnostics("the update on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { (byToken[$0] ?? []).contains { $0.contentState == ["teamOneScore": 1, "teamTwoScore": 0, "period": "first_half"] } } ? true : nil
        }

        // The same start again: the update tokens get its state, the fans no second start.
        try await stack.produce("livedispatch.commands", key: Self.activity, start(score: 2))
        _ = try await stack.waitWithDiagnostics("the repeated start handled for both fans", workers: [worker]) {
            try alreadyStarted(stack, port: adminPort) >= 2 ? true : nil
        }
        _ = try await stack.waitWithDiagnostics("the repeated start's state on each update token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return updateTokens.allSatisfy { byToken[$0]?.last?.contentState == ["teamOneScore": 2, "teamTwoScore": 0, "period": "first_half"] } ? true : nil
        }
        #expect(try await worker.stop() == 0)

        // A worker of another group is re-delivered every record; the ledgers restored from token-store hold.
        let secondPort = try freePort()
        let second = try await stack.startWorker(configuration: try stack.writeConfiguration(group: "e2e-again", adminPort: secondPort))
        _ = try await stack.waitWithDiagnostics("both audience starts re-delivered and refused", workers: [second]) {
            try alreadyStarted(stack, port: secondPort) >= 4 ? true : nil
        }
        let final = stack.pushesByToken()
        for fan in fans { #expect(final[fan]?.count == 1, "exactly one start per push-to-start token") }
        #expect(final[otherType] == nil, "another attributes type is not started")
        #expect(final[otherAudience] == nil, "another audience is not started")
        #expect(updateTokens.allSatisfy { (final[$0] ?? []).allSatisfy { $0.event == "update" } }, "update tokens are never sent a start")
        #expect(try await stack.deadLetters().isEmpty)
        #expect(try await second.stop() == 0)
    }
}
