import Foundation
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import Synchronization
import Testing

extension Components.Schemas.AlertText: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .case1(value) }
}

/// What a test's `WorkerAPI` produced: topic, key, value.
final class ProducedRecords: Sendable {
    let produced = Mutex<[(String, [UInt8], [UInt8])]>([])
}

@Suite("Ingest API: requests to commands")
struct IngestCommandTests {
    typealias Update = Components.Schemas.UpdateRequest

    func command(_ body: some Encodable, event: ActivityEvent = .update, activity: String = "match-42", key: String? = nil) -> Result<ActivityCommand, APIError> {
        WorkerAPI.command(event, activity: activity, idempotencyKey: key, body: body, makeID: { "generated-id" })
    }

    func problems(_ result: Result<ActivityCommand, APIError>) -> [String] {
        guard case .failure(let error) = result else { return [] }
        return error.problems.map(\.pointer)
    }

    @Test("an update carries the path's activity, the route's event and the idempotency key as its id")
    func update() throws {
        let body = Update(contentState: try .init(unvalidatedValue: ["teamOneScore": 2]), priority: 5, relevanceScore: 50)
        let made = try command(body, key: "retry-1").get()
        #expect(made.activityID.rawValue == "match-42")
        #expect(made.event == .update)
        #expect(made.id == "retry-1")
        #expect(made.contentState == .object(["teamOneScore": .integer(2)]))
        #expect(made.priority == .normal)
        #expect(try command(body).get().id == "generated-id")
    }

    @Test("a localized title and body, in the alert or in Braze's notification, reach the command; a bad argument is pointed at")
    func localizedAlert() throws {
        let title = Components.Schemas.AlertText.LocalizedText(.init(locKey: "GOAL_TITLE", locArgs: ["Ada", "67"]))
        let expected = ActivityAlert(title: .localized(key: "GOAL_TITLE", arguments: ["Ada", "67"]), body: "2–1")
        #expect(try command(Update(alert: .init(title: title, body: "2–1"))).get().alert == expected)
        #expect(try command(Update(notification: .init(alert: .init(title: title, body: "2–1")))).get().alert == expected)
        let empty = Components.Schemas.AlertText.LocalizedText(.init(locKey: ""))
        #expect(problems(command(Update(alert: .init(title: empty, body: "b")))) == ["/alert/title/loc_key"])
    }

    @Test("Braze's notification becomes the alert")
    func notification() throws {
        let body = Update(notification: .init(alert: .init(title: "Goal!", body: "2–1"), sound: "default"))
        #expect(try command(body).get().alert == ActivityAlert(title: "Goal!", body: "2–1", sound: "default"))
        let both = Update(notification: .init(alert: .init(title: "a", body: "b")), alert: .init(title: "c", body: "d"))
        #expect(problems(command(both)) == ["/notification"])
    }

    @Test("the commands topic's decoder finds bad fields, named by JSON pointer")
    func badFields() {
        #expect(problems(command(Update(priority: 3))) == ["/priority"])
        #expect(problems(command(Update(timestamp: .case1(1e300)))) == ["/timestamp"])
        #expect(problems(command(Update(staleDate: .case2("yesterday")))) == ["/stale_date"])
        #expect(problems(command(Update(replaceState: true))) == ["/content_state"])
        #expect(problems(command(Update(), activity: "")) == ["#/parameters/activity_id"])
        #expect(problems(command(Update(), activity: String(repeating: "x", count: 300))) == ["#/parameters/activity_id"])
        #expect(problems(command(Update(), key: "has space")) == ["#/parameters/Idempotency-Key"])
        #expect(problems(command(Update(), key: String(repeating: "k", count: 201))) == ["#/parameters/Idempotency-Key"])
    }

    @Test("a start needs the alert, the attributes type and the attributes")
    func start() throws {
        let bare = Components.Schemas.StartRequest(contentState: try .init(unvalidatedValue: ["eta": 5]))
        #expect(problems(command(bare, event: .start)) == ["/alert"])
        let full = Components.Schemas.StartRequest(
            contentState: try .init(unvalidatedValue: ["eta": 5]), notification: .init(alert: .init(title: "On its way", body: "5 min")),
            attributesType: "DeliveryAttributes", attributes: try .init(unvalidatedValue: ["order": "A1"]))
        let made = try command(full, event: .start).get()
        #expect(made.event == .start)
        #expect(made.attributesType == "DeliveryAttributes")
    }

    @Test("a start names its audiences; a bad one is pointed at by its index")
    func startAudiences() throws {
        func start(_ audiences: [String]) throws -> Components.Schemas.StartRequest {
            Components.Schemas.StartRequest(
                contentState: try .init(unvalidatedValue: ["teamOneScore": 0]), alert: .init(title: "Kick-off", body: "Owls v Hawks"),
                attributesType: "SportsActivityAttributes", attributes: try .init(unvalidatedValue: ["teamOneName": "Owls"]),
                audiences: audiences)
        }
        let made = try command(try start(["user-1", "followers:owls"]), event: .start).get()
        #expect(made.audiences.map(\.rawValue) == ["user-1", "followers:owls"])
        #expect(problems(command(try start(["user-1", ""]), event: .start)) == ["/audiences/1"])
        #expect(problems(command(try start(["user-1", "user-1"]), event: .start)) == ["/audiences"])
    }

    @Test("a start may be broadcast with a storage policy; broadcast on an update is pointed at")
    func startBroadcast() throws {
        let start = Components.Schemas.StartRequest(
            contentState: try .init(unvalidatedValue: ["teamOneScore": 0]), alert: .init(title: "Kick-off", body: "Owls v Hawks"),
            attributesType: "SportsActivityAttributes", attributes: try .init(unvalidatedValue: ["teamOneName": "Owls"]),
            broadcast: true, storagePolicy: .noStorage)
        let made = try command(start, event: .start).get()
        #expect(made.broadcast == true)
        #expect(made.storagePolicy == .noStorage)
        struct BroadcastUpdate: Encodable { var broadcast = true }
        #expect(problems(command(BroadcastUpdate())) == ["/broadcast"])
    }

    @Test("a push-to-start token is produced to tokens under its audience key")
    func pushToStartToken() async throws {
        let rules = try ExplainRulesTests.shippedRules()
        let records = ProducedRecords()
        let api = WorkerAPI(
            topics: .init(commands: "c", tokens: "livedispatch.tokens", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { topic, key, value in records.produced.withLock { $0.append((topic, key, value)) } }, makeID: { "id" }, rules: { rules }, readTopic: { _, _, _ in })
        let hex = String(repeating: "ab", count: 32)
        let body = Components.Schemas.TokenRequest(kind: .pushToStart, audience: "followers:owls", attributesType: "SportsActivityAttributes", token: hex)
        guard case .object(var fields) = WorkerAPI.encoded(body) else {
            Issue.record("the body must encode as an object")
            return
        }
        fields["action"] = "register"
        guard case .accepted(let accepted) = await api.submit(registration: .object(fields)) else {
            Issue.record("a push-to-start registration must be accepted")
            return
        }
        #expect(accepted.audience == "followers:owls" && accepted.activityId == nil && accepted.token == hex)
        let record = try #require(records.produced.withLock { $0.first })
        #expect(record.0 == "livedispatch.tokens")
        #expect(record.1 == Array("followers:owls".utf8))
        #expect(try TokenRecord(bytes: record.2) == .pushToStart(PushToStartRegistration(
            audience: try AudienceKey("followers:owls"), attributesType: "SportsActivityAttributes", token: try DeviceToken(hex: hex))))
        fields["activity_id"] = "match-1"
        guard case .invalid(let error) = await api.submit(registration: .object(fields)) else {
            Issue.record("a push-to-start token with an activity id must be refused")
            return
        }
        #expect(error.problems.map(\.pointer) == ["/activity_id"])
    }

    @Test("JSON pointers escape ~ and /")
    func pointers() {
        #expect(JSONPointer.make(["a/b", "c~d"]) == "/a~1b/c~0d")
        #expect(JSONPointer.make([String]()) == "")
    }

    @Test("an accepted command is produced to the commands topic under its activity id, once acknowledged")
    func produced() async throws {
        let rules = try ExplainRulesTests.shippedRules()
        let records = ProducedRecords()
        let api = WorkerAPI(
            topics: .init(commands: "livedispatch.commands", tokens: "livedispatch.tokens", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { topic, key, value in records.produced.withLock { $0.append((topic, key, value)) } }, makeID: { "id-1" }, rules: { rules }, readTopic: { _, _, _ in })
        let outcome = await api.submit(.end, activity: "match-42", idempotencyKey: nil, body: Update())
        guard case .accepted(let accepted) = outcome else {
            Issue.record("expected the command to be accepted, got \(outcome)")
            return
        }
        #expect(accepted.commandId == "id-1")
        let record = try #require(records.produced.withLock { $0.first })
        #expect(record.0 == "livedispatch.commands")
        #expect(record.1 == Array("match-42".utf8))
        let sent = try ActivityCommand(bytes: record.2)
        #expect(sent.event == .end && sent.id == "id-1")
    }

    @Test("a record Kafka did not acknowledge is a 503 with Retry-After, and nothing is accepted")
    func unavailable() async throws {
        let rules = try ExplainRulesTests.shippedRules()
        struct Refused: Error {}
        let api = WorkerAPI(
            topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"), produce: { _, _, _ in throw Refused() }, makeID: { "id" }, rules: { rules }, readTopic: { _, _, _ in })
        guard case .unavailable(let error) = await api.submit(.update, activity: "a", idempotencyKey: nil, body: Update()) else {
            Issue.record("expected 503")
            return
        }
        #expect(error.status == .serviceUnavailable && error.retryAfter == 1)
    }

    @Test("token registrations use the tokens topic's decoder")
    func tokens() async throws {
        let rules = try ExplainRulesTests.shippedRules()
        let api = WorkerAPI(topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"), produce: { _, _, _ in }, makeID: { "id" }, rules: { rules }, readTopic: { _, _, _ in })
        let bad = await api.submit(registration: .object(["activity_id": "a", "token": "zz", "action": "register"]))
        guard case .invalid(let error) = bad else {
            Issue.record("a non-hex token must be refused")
            return
        }
        #expect(error.problems.map(\.pointer) == ["/token"])
        let deleted = await api.submit(registration: .object(["activity_id": "a", "token": "zz", "action": "unregister"]), inParameters: true)
        guard case .invalid(let parameterError) = deleted else {
            Issue.record("a non-hex token must be refused")
            return
        }
        #expect(parameterError.problems.map(\.pointer) == ["#/parameters/token"])
        let good = await api.submit(registration: .object(["activity_id": "a", "token": .string(String(repeating: "ab", count: 32)), "action": "register"]))
        guard case .accepted(let accepted) = good else {
            Issue.record("a valid registration must be accepted")
            return
        }
        #expect(accepted.action == .register && accepted.activityId == "a")
    }

    @Test("app is checked against the deployment's apps, for commands and tokens, as the dispatcher does")
    func apps() async throws {
        let rules = try ExplainRulesTests.shippedRules()
        let apps = AppDirectory([.init(name: "scores"), .init(name: "courier", environment: .sandbox)])
        let named = Update(contentState: try .init(unvalidatedValue: ["teamOneScore": 2]), app: "scores")
        #expect(try WorkerAPI.command(.update, activity: "m", idempotencyKey: nil, body: named, makeID: { "id" }, apps: apps).get().app == "scores")
        let unknown = Update(app: "weather")
        #expect(problems(WorkerAPI.command(.update, activity: "m", idempotencyKey: nil, body: unknown, makeID: { "id" }, apps: apps)) == ["/app"])

        let records = ProducedRecords()
        var api = WorkerAPI(
            topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { topic, key, value in records.produced.withLock { $0.append((topic, key, value)) } }, makeID: { "id" }, rules: { rules }, readTopic: { _, _, _ in })
        api.apps = apps
        let hex = String(repeating: "ab", count: 32)
        guard case .invalid(let missing) = await api.submit(registration: .object(["activity_id": "a", "token": .string(hex)])) else {
            Issue.record("a token naming no app among several must be refused")
            return
        }
        #expect(missing.problems.map(\.pointer) == ["/app"])
        guard case .accepted = await api.submit(registration: .object(["activity_id": "a", "token": .string(hex), "app": "courier"])) else {
            Issue.record("a token of a known app must be accepted")
            return
        }
        let produced = try TokenRecord(bytes: try #require(records.produced.withLock { $0.first }).2)
        guard case .update(let registration) = produced else {
            Issue.record("an update token must be produced")
            return
        }
        #expect(registration.app == "courier")
        #expect(registration.environment == .sandbox, "the app's environment is written into the record")
    }
}
