@testable import LiveDispatchCore
import Testing

/// Records naming their app, and the dispatcher sending each token with its
/// own app.
@Suite("Several apps")
struct AppsTests {
    let hex = String(repeating: "ab12", count: 16)
    let scoresFan = try! DeviceToken(hex: String(repeating: "5c01", count: 16))
    let courierFan = try! DeviceToken(hex: String(repeating: "c002", count: 16))
    let apps = AppDirectory([.init(name: "scores"), .init(name: "courier", environment: .sandbox)])

    func json(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

    @Test("a token names its app; without an environment it takes its app's")
    func tokenApp() throws {
        let courier = try TokenRegistration(json: json(#"{"activity_id": "order-1", "token": "\#(hex)", "app": "courier"}"#), apps: apps)
        #expect(courier.app == "courier")
        #expect(courier.environment == .sandbox)
        #expect(try TokenRegistration(json: courier.json) == courier, "the JSON form keeps the app")
        let named = try TokenRegistration(json: json(#"{"activity_id": "order-1", "token": "\#(hex)", "app": "courier", "environment": "production"}"#), apps: apps)
        #expect(named.environment == .production, "a named environment wins")

        let only = AppDirectory([.init(name: "default", environment: .sandbox)])
        let unnamed = try TokenRegistration(json: json(#"{"activity_id": "order-1", "token": "\#(hex)"}"#), apps: only)
        #expect(unnamed.app == nil, "with one app a record need not name it")
        #expect(unnamed.environment == .sandbox)

        let pushToStart = try TokenRecord(
            json: json(#"{"kind": "push_to_start", "audience": "fans", "attributes_type": "Score", "token": "\#(hex)", "app": "scores"}"#), apps: apps)
        guard case .pushToStart(let registration) = pushToStart else {
            Issue.record("not read as a push-to-start token")
            return
        }
        #expect(registration.app == "scores")
        #expect(try TokenRecord(json: pushToStart.json) == pushToStart)
    }

    @Test("an unknown app, a missing one among several, or a malformed name is an error naming app")
    func tokenAppErrors() throws {
        let unknown = fieldError { _ = try TokenRecord(json: json(#"{"activity_id": "a", "token": "\#(hex)", "app": "weather"}"#), apps: apps) }
        #expect(unknown?.field == "app")
        #expect(unknown?.message == #""weather" is not an app of this deployment (known: scores, courier)"#)
        let missing = fieldError { _ = try TokenRecord(json: json(#"{"activity_id": "a", "token": "\#(hex)"}"#), apps: apps) }
        #expect(missing?.field == "app")
        #expect(missing?.message == "is required: this deployment sends for several apps (scores, courier)")
        let malformed = fieldError { _ = try TokenRecord(json: json(#"{"activity_id": "a", "token": "\#(hex)", "app": "no spaces"}"#)) }
        #expect(malformed?.field == "app", "the shape is checked even without a directory")
        let unregister = try TokenRecord(json: json(#"{"activity_id": "a", "token": "\#(hex)", "action": "unregister"}"#), apps: apps)
        #expect(unregister.json["action"] == "unregister", "an unregistration need not name the app")
        let notText = fieldError { _ = try TokenRecord(json: json(#"{"activity_id": "a", "token": "\#(hex)", "app": 7}"#)) }
        #expect(notText?.field == "app")
    }

    @Test("a start names its app among several; an update or end may leave it to the activity")
    func commandApp() throws {
        let start = #"{"activity_id": "m", "event": "start", "alert": {"title": "t", "body": "b"}, "attributes_type": "Score", "attributes": {}"#
        let named = try ActivityCommand(json: json(start + #", "app": "scores"}"#), apps: apps)
        #expect(named.app == "scores")
        #expect(try ActivityCommand(json: named.json) == named)
        #expect(fieldError { _ = try ActivityCommand(json: json(start + "}"), apps: apps) }?.field == "app")
        #expect(fieldError { _ = try ActivityCommand(json: json(start + #", "app": "weather"}"#), apps: apps) }?.field == "app")
        #expect(try ActivityCommand(json: json(#"{"activity_id": "m", "content_state": {"s": 1}}"#), apps: apps).app == nil)
        #expect(fieldError { _ = try ActivityCommand(json: json(#"{"activity_id": "m", "app": "weather"}"#), apps: apps) }?.field == "app")
    }

    @Test("the activity's app survives its snapshot and its audience starts")
    func snapshots() throws {
        var state = ActivityState(activityID: try ActivityID("m"), createdAt: UnixTime(seconds: 1_764_000_000))
        state.app = "courier"
        #expect(try ActivityState(json: state.json).app == "courier")
        let push = LiveActivityPush(
            activityID: try ActivityID("m"), version: 1, event: .start, contentState: ["s": 1], timestamp: UnixTime(seconds: 1_764_000_000),
            alert: ActivityAlert(title: "t", body: "b"), attributesType: "Score", attributes: [:])
        let start = AudienceStart(audience: try AudienceKey("fans"), push: push, app: "scores")
        #expect(try AudienceStart(json: start.json).app == "scores")
    }

    @Test("each token is sent with its own app and its app's environment; unknown or missing apps are dead-lettered")
    func dispatcherSends() throws {
        var harness = DispatcherHarness(configuration: .init(apps: apps))
        harness.restore()
        harness.token(0, #"{"activity_id": "match-1", "token": "\#(scoresFan.hex)", "app": "scores"}"#)
        harness.token(1, #"{"activity_id": "match-1", "token": "\#(courierFan.hex)", "app": "courier"}"#)
        harness.token(2, #"{"activity_id": "match-1", "token": "\#(hex)"}"#)
        harness.token(3, #"{"activity_id": "match-1", "token": "\#(hex)", "app": "weather"}"#)
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.invalidCommand, .invalidCommand])
        #expect(letters.allSatisfy { $0.message.contains("field 'app'") }, "\(letters.map(\.message))")
        #expect(harness.commits[.tokens] == 4)

        harness.command(0, #"{"activity_id": "match-1", "content_state": {"s": 1}}"#)
        harness.advance(by: 1)
        let sends = harness.sent.sorted { $0.token < $1.token }
        #expect(sends.map(\.token) == [scoresFan, courierFan].sorted())
        for send in sends {
            if send.token == scoresFan {
                #expect(send.app == "scores")
                #expect(send.environment == .production)
            } else {
                #expect(send.app == "courier")
                #expect(send.environment == .sandbox)
            }
        }
    }

    @Test("a start of one app reaches only that app's push-to-start tokens, and the activity keeps its app")
    func startsStayInTheirApp() throws {
        var harness = DispatcherHarness(configuration: .init(apps: apps))
        harness.restore()
        harness.token(0, #"{"kind": "push_to_start", "audience": "fans", "attributes_type": "Score", "token": "\#(scoresFan.hex)", "app": "scores"}"#)
        harness.token(1, #"{"kind": "push_to_start", "audience": "fans", "attributes_type": "Score", "token": "\#(courierFan.hex)", "app": "courier"}"#)
        harness.command(0, #"{"activity_id": "match-1", "event": "start", "content_state": {"s": 0}, "alert": {"title": "t", "body": "b"}, "attributes_type": "Score", "attributes": {}, "audiences": ["fans"], "app": "scores"}"#)
        for (index, produce) in harness.produced(on: .starts).enumerated() { harness.audienceStart(Int64(index), produce.value ?? []) }
        #expect(harness.sent.map(\.token) == [scoresFan])
        #expect(harness.sent.first?.app == "scores")
        #expect(harness.dispatcher.state(of: try ActivityID("match-1"))?.app == "scores")

        harness.command(1, #"{"activity_id": "match-1", "content_state": {"s": 1}, "app": "courier"}"#)
        let letter = try #require(try harness.deadLetters().last)
        #expect(letter.reason == .invalidCommand)
        #expect(letter.message.contains(#"names app "courier", but activity match-1 belongs to app "scores""#), "\(letter.message)")
    }

    @Test("the priority budget is the activity's app's, else the global one")
    func budgetPerApp() throws {
        let configuration = Coalescer.Configuration(window: 0, maxDelay: 0, priority10PerHour: nil, priority10PerHourByApp: ["scores": 1, "courier": nil])
        #expect(configuration.priority10PerHour(for: "scores") == 1)
        #expect(configuration.priority10PerHour(for: "courier") == nil)
        #expect(configuration.priority10PerHour(for: "weather") == nil)
        var coalescer = Coalescer(configuration: configuration)
        let now = UnixTime(seconds: 1_764_000_000)
        func priorities(_ activity: String, app: String) throws -> [PushPriority] {
            var result: [PushPriority] = []
            for offset in Int64(0)..<3 {
                let command = ActivityCommand(activityID: try ActivityID(activity), contentState: ["s": .integer(offset)], app: offset == 0 ? app : nil)
                switch coalescer.receive(command, offset: offset, recordTime: now, now: now + Double(offset)) {
                case .flush(let flush): result.append(flush.push.priority)
                case .scheduleFlush(let at):
                    if case .flush(let flush) = coalescer.timerFired(for: try ActivityID(activity), now: at) { result.append(flush.push.priority) }
                case .alreadyApplied, .duplicate, .reject: break
                }
            }
            return result
        }
        #expect(try priorities("match-1", app: "scores") == [.immediate, .normal, .normal])
        #expect(try priorities("order-1", app: "courier") == [.immediate, .immediate, .immediate])
    }
}
