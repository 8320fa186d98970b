import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import LiveDispatchHTTP
import LiveDispatchCore
import NIOCore
import Testing

/// What the write routes refuse at once instead of accepting and leaving
/// the dispatcher to dead-letter where the caller never sees it.
@Suite("Admission of the write routes")
struct AdmissionTests {
    static let ingest = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]
    static let t0 = UnixTime(seconds: 1_764_000_000)

    func post(_ server: InProcessServer, _ uri: String, _ body: String) async throws -> (HTTPResponse.Status, JSONValue) {
        try await server.application.test(.router) { client in
            try await client.execute(uri: uri, method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) { response in
                (response.status, (try? JSONValue.parse(String(buffer: response.body))) ?? .null)
            }
        }
    }

    static func update(_ activity: String, id: String, _ contentState: JSONValue, event: String = "update") throws -> ActivityCommand {
        try ActivityCommand(json: ["activity_id": .string(activity), "id": .string(id), "event": .string(event), "content_state": contentState])
    }

    // MARK: AcceptedCommands, without I/O

    @Test("accepted commands are folded into the state read here until it shows them or they expire")
    func projection() throws {
        var machine = AcceptedCommands(configuration: .init(lifetime: .seconds(5)))
        let activity = try ActivityID("m")
        #expect(machine.projection(of: activity, current: nil, now: Self.t0).state == nil)

        let first = try Self.update("m", id: "c1", ["a": 1])
        machine.accept(first, now: Self.t0)
        let second = try Self.update("m", id: "c2", ["b": 2])
        machine.accept(second, now: Self.t0 + 0.1)
        let pending = machine.projection(of: activity, current: nil, now: Self.t0 + 0.2)
        #expect(pending.state?.contentState == ["a": 1, "b": 2] && pending.hasPending && !pending.isWhole)

        // The state read here shows the first: only the second is folded in, on that state.
        var current = ActivityState(activityID: activity, createdAt: Self.t0)
        current.contentState = ["a": 1, "c": 3]
        current.remember("c1", at: Self.t0 + 0.15, since: Self.t0 + -60, limit: 16)
        let seen = machine.projection(of: activity, current: current, now: Self.t0 + 0.3)
        #expect(seen.state?.contentState == ["a": 1, "b": 2, "c": 3] && seen.isWhole)
        current.remember("c2", at: Self.t0 + 0.2, since: Self.t0 + -60, limit: 16)
        #expect(!machine.projection(of: activity, current: current, now: Self.t0 + 0.4).hasPending)
        #expect(machine.activityCount == 0)

        // Expired after the lifetime; a withdrawn one stops counting at once.
        machine.accept(first, now: Self.t0)
        #expect(machine.projection(of: activity, current: nil, now: Self.t0 + 4.9).hasPending)
        #expect(!machine.projection(of: activity, current: nil, now: Self.t0 + 5).hasPending)
        machine.accept(first, now: Self.t0 + 10)
        machine.withdraw(first)
        #expect(!machine.projection(of: activity, current: nil, now: Self.t0 + 10).hasPending)

        // An accepted start makes the state whole; an end ends it.
        let start = try ActivityCommand(json: JSONValue.parse(
            #"{"activity_id": "m", "id": "s", "event": "start", "attributes_type": "T", "attributes": {}, "alert": {"title": "t", "body": "b"}, "content_state": {"x": 1}}"#))
        machine.accept(start, now: Self.t0 + 20)
        machine.accept(try Self.update("m", id: "e", [:], event: "end"), now: Self.t0 + 20.1)
        let started = machine.projection(of: activity, current: nil, now: Self.t0 + 20.2)
        #expect(started.isWhole && started.state?.attributesType == "T" && started.state?.isEnded == true)
    }

    @Test("the accepted commands kept are bounded: per activity, and in activities, the stalest forgotten first")
    func bounds() throws {
        var machine = AcceptedCommands(configuration: .init(lifetime: .seconds(5), maxActivities: 3, maxPerActivity: 2))
        for index in 0..<3 { machine.accept(try Self.update("m", id: "c\(index)", ["k\(index)": 1]), now: Self.t0 + Double(index) * 0.01) }
        #expect(machine.projection(of: try ActivityID("m"), current: nil, now: Self.t0 + 0.1).state?.contentState == ["k1": 1, "k2": 1])
        for index in 0..<4 { machine.accept(try Self.update("a\(index)", id: "x", ["k": 1]), now: Self.t0 + 1 + Double(index) * 0.01) }
        #expect(machine.activityCount == 3)
        #expect(!machine.projection(of: try ActivityID("m"), current: nil, now: Self.t0 + 1.1).hasPending, "the stalest activity went first")
    }

    // MARK: Over HTTP

    @Test("two updates of 2.5 KB sent back to back: the second is answered 413 with the size it makes with the first")
    func backToBack() async throws {
        let server = try InProcessServer()
        let half = String(repeating: "x", count: 2_500)
        let first = try await post(server, "/v1/activities/big/update", #"{"content_state": {"one": "\#(half)"}}"#)
        #expect(first.0 == .accepted, "\(first.1)")
        let second = try await post(server, "/v1/activities/big/update", #"{"content_state": {"two": "\#(half)"}}"#)
        #expect(second.0 == .contentTooLarge, "\(second.1)")
        #expect(second.1["error"] == "payload-too-large")
        let message = second.1["message"]?.stringValue ?? ""
        #expect(message.contains("the commands accepted before it") && message.contains("4096"), "\(message)")
        #expect(server.producedRecords.count == 1, "the second was not produced")
        // Another activity is not affected.
        #expect(try await post(server, "/v1/activities/other/update", #"{"content_state": {"two": "\#(half)"}}"#).0 == .accepted)
    }

    @Test("an end of an activity the owning worker holds no state of is answered 404; one accepted after its start is not")
    func endWithoutState() async throws {
        let server = try InProcessServer(
            apps: AppDirectory([.init(name: "default")]), brazeApps: BrazeApps([.init(name: "default", bundleID: "com.example.app", brazeAppID: "")]),
            hasNoState: { $0.rawValue != "elsewhere" })
        let answer = try await post(server, "/v1/activities/ghost/end", #"{"content_state": {}}"#)
        #expect(answer.0 == .notFound, "\(answer.1)")
        #expect(answer.1["error"] == "no-activity")
        #expect(answer.1["message"]?.stringValue?.contains("nothing to end") == true)
        #expect(answer.1["problems"]?.arrayValue?.first?["pointer"] == "#/parameters/activity_id")
        #expect(server.producedRecords.isEmpty)

        // Braze's end: the same answer, naming its body's field.
        let braze = try await post(server, "/messages/live_activity/update", #"{"app_id": "default", "activity_id": "ghost", "content_state": {}, "end_activity": true}"#)
        #expect(braze.0 == .notFound, "\(braze.1)")
        #expect(braze.1["problems"]?.arrayValue?.first?["pointer"] == "/activity_id", "\(braze.1)")
        #expect(braze.1["message"]?.stringValue?.contains("nothing to end") == true)

        // Started here a moment ago, not applied yet: the end is taken.
        #expect(try await post(server, "/v1/activities/fresh/update", #"{"content_state": {"a": 1}}"#).0 == .accepted)
        #expect(try await post(server, "/v1/activities/fresh/end", #"{"content_state": {}}"#).0 == .accepted)
        // Where the worker cannot tell, the end is taken as before.
        #expect(try await post(server, "/v1/activities/elsewhere/end", #"{"content_state": {}}"#).0 == .accepted)
    }

    @Test("a Braze update naming another app than its activity's is refused 422 naming app_id, and the command names its app")
    func brazeUpdateApp() async throws {
        let apps = AppDirectory([.init(name: "scores"), .init(name: "deliveries")])
        let brazeApps = BrazeApps([
            .init(name: "scores", bundleID: "com.example.scores", brazeAppID: "braze-scores"),
            .init(name: "deliveries", bundleID: "com.example.deliveries", brazeAppID: "braze-deliveries"),
        ])
        var state = ActivityState(activityID: try ActivityID("match-1"), createdAt: Self.t0)
        state.contentState = ["teamOneScore": 0]
        state.app = "scores"
        let server = try InProcessServer(currentState: { [state] in $0 == state.activityID ? state : nil }, apps: apps, brazeApps: brazeApps)

        let wrong = try await post(server, "/messages/live_activity/update", #"{"app_id": "braze-deliveries", "activity_id": "match-1", "content_state": {"teamOneScore": 1}}"#)
        #expect(wrong.0 == .unprocessableContent, "\(wrong.1)")
        #expect(wrong.1["errors"]?.arrayValue?.first?["pointer"] == "/app_id", "\(wrong.1)")
        #expect(wrong.1["message"]?.stringValue?.contains("belongs to app \"scores\"") == true)
        #expect(server.producedRecords.isEmpty)

        let right = try await post(server, "/messages/live_activity/update", #"{"app_id": "braze-scores", "activity_id": "match-1", "content_state": {"teamOneScore": 1}}"#)
        #expect(right.0 == .created, "\(right.1)")
        // Another worker's activity: the command names the app, and its dispatcher refuses a mismatch.
        #expect(try await post(server, "/messages/live_activity/update", #"{"app_id": "braze-deliveries", "activity_id": "match-2", "content_state": {"x": 1}}"#).0 == .created)
        let sent = try server.producedRecords.map { try ActivityCommand(bytes: $0.value) }
        #expect(sent.map(\.app) == ["scores", "deliveries"])
    }

    @Test("a push-to-start registration for an undeclared attributes type is refused 422 with the declared types and the nearest")
    func pushToStartType() async throws {
        let server = try InProcessServer()
        let hex = String(repeating: "ab", count: 32)
        let answer = try await post(
            server, "/v1/tokens", #"{"kind": "push_to_start", "audience": "followers:owls", "attributes_type": "SportActivityAttributes", "token": "\#(hex)"}"#)
        #expect(answer.0 == .unprocessableContent, "\(answer.1)")
        #expect(answer.1["error"] == "undeclared-type")
        let problem = answer.1["problems"]?.arrayValue?.first
        #expect(problem?["pointer"] == "/attributes_type")
        let message = problem?["message"]?.stringValue ?? ""
        #expect(message.contains("did you mean 'SportsActivityAttributes'?") && message.contains("DeliveryActivityAttributes"), "\(message)")
        #expect(server.producedRecords.isEmpty)

        // A declared type is registered; an unregistration of any type is taken.
        #expect(try await post(
            server, "/v1/tokens", #"{"kind": "push_to_start", "audience": "followers:owls", "attributes_type": "SportsActivityAttributes", "token": "\#(hex)"}"#).0 == .accepted)
        let removed = try await server.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/tokens/\(hex)?kind=push_to_start&audience=followers:owls&attributes_type=Gone", method: .delete,
                headers: InProcessServer.bearer("ingest-key")) { $0.status }
        }
        #expect(removed == .accepted)
    }

    @Test("a 422 lists every field that does not fit, a misspelling beside the field it meant")
    func everyProblem() async throws {
        let server = try InProcessServer()
        let answer = try await post(
            server, "/v1/activities/match-all/start",
            #"{"attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"}, "alert": {"title": "t", "body": "b"}, "content_state": {"teamOneScroe": 0, "teamTwoScore": 0}}"#)
        #expect(answer.0 == .unprocessableContent, "\(answer.1)")
        let problems = answer.1["problems"]?.arrayValue ?? []
        #expect(problems.compactMap { $0["pointer"]?.stringValue } == ["/content_state/teamOneScore", "/content_state/period", "/content_state/teamOneScroe"])
        #expect(problems.last?["message"]?.stringValue?.contains("did you mean 'teamOneScore'?") == true)
        #expect(answer.1["message"]?.stringValue?.contains("content_state.teamOneScroe") == true, "the message names them too")
    }
}
