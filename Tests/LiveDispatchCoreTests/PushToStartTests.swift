@testable import LiveDispatchCore
import Testing

@Suite("Push-to-start budget")
struct PushToStartBudgetTests {
    let token = try! DeviceToken(hex: String(repeating: "cc03", count: 16))
    let other = try! DeviceToken(hex: String(repeating: "dd04", count: 16))
    let start = UnixTime(seconds: 1_764_000_000)

    func activity(_ number: Int) -> ActivityID { try! ActivityID("match-\(number)") }

    @Test("a token is never admitted two starts of one activity, even much later")
    func oncePerActivity() {
        var budget = PushToStartBudget()
        #expect(budget.admit(token, activity: activity(1), now: start) == .start)
        #expect(budget.admit(token, activity: activity(1), now: start + 1) == .alreadyStarted(at: start))
        #expect(budget.admit(token, activity: activity(1), now: start + 86_400) == .alreadyStarted(at: start))
        #expect(budget.admit(other, activity: activity(1), now: start + 1) == .start, "another token is its own")
    }

    @Test("past max_starts_per_hour in a sliding hour a start is refused until the oldest leaves the window")
    func rateLimit() {
        var budget = PushToStartBudget(configuration: .init(maxStartsPerHour: 3))
        for number in 1...3 {
            #expect(budget.admit(token, activity: activity(number), now: start + Double(number) * 60) == .start)
        }
        #expect(budget.admit(token, activity: activity(4), now: start + 600)
            == .rateLimited(starts: 3, limit: 3, nextAllowedAt: start + 60 + 3600))
        #expect(budget.admit(token, activity: activity(4), now: start + 60 + 3600) == .start)
        #expect(budget.admit(token, activity: activity(5), now: start + 60 + 3601)
            == .rateLimited(starts: 3, limit: 3, nextAllowedAt: start + 120 + 3600))
        #expect(budget.ledger(of: token).starts.map(\.activityID) == (1...4).map(activity))
    }

    @Test("the ledger is bounded, survives its JSON form, and restored ledgers merge")
    func ledger() {
        var budget = PushToStartBudget(configuration: .init(maxStartsPerHour: 2, rememberedStarts: 3))
        for number in 1...5 { _ = budget.admit(token, activity: activity(number), now: start + Double(number) * 3600) }
        let ledger = budget.ledger(of: token)
        #expect(ledger.starts.map(\.activityID) == [activity(3), activity(4), activity(5)])
        #expect(PushToStartBudget.Ledger(json: ledger.json) == ledger)
        #expect(PushToStartBudget.Ledger(json: ["not a start", ["activity_id": "", "at": 1]]).starts.isEmpty, "bad entries are skipped")

        var restored = PushToStartBudget()
        restored.restore(token, PushToStartBudget.Ledger(starts: [.init(activityID: activity(9), at: start + 99)]))
        restored.restore(token, ledger)
        #expect(restored.ledger(of: token).starts.map(\.activityID) == [activity(9), activity(3), activity(4), activity(5)])
        #expect(restored.admit(token, activity: activity(9), now: start + 10 * 3600) == .alreadyStarted(at: start + 99))
        restored.forget(token)
        #expect(restored.ledger(of: token).starts.isEmpty)
    }
}

@Suite("Push-to-start records")
struct PushToStartRecordTests {
    let hex = String(repeating: "ee05", count: 16)

    func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

    @Test("a push_to_start registration has an audience and an attributes type, and is keyed by the audience")
    func pushToStartRegistration() throws {
        let record = try TokenRecord(json: parse(#"{"kind": "push_to_start", "audience": "followers:owls", "attributes_type": "SportsActivityAttributes", "token": "\#(hex)", "environment": "sandbox"}"#))
        guard case .pushToStart(let registration) = record else {
            Issue.record("not read as a push-to-start token")
            return
        }
        #expect(registration.audience.rawValue == "followers:owls")
        #expect(registration.attributesType == "SportsActivityAttributes")
        #expect(registration.environment == .sandbox)
        #expect(record.key == "followers:owls")
        #expect(try TokenRecord(json: record.json) == record)
        #expect(registration.storeKey == "followers:owls\u{1E}\(hex)")
        let update = try TokenRecord(json: parse(#"{"activity_id": "match-1", "token": "\#(hex)"}"#))
        #expect(update == .update(TokenRegistration(activityID: try ActivityID("match-1"), token: try DeviceToken(hex: hex))))
        #expect(update.key == "match-1")
    }

    @Test("bad combinations are refused with the field named")
    func badCombinations() throws {
        let cases: [(String, String)] = [
            (#"{"kind": "push_to_start", "activity_id": "m", "audience": "a", "attributes_type": "T", "token": "\#(hex)"}"#, "activity_id"),
            (#"{"kind": "push_to_start", "attributes_type": "T", "token": "\#(hex)"}"#, "audience"),
            (#"{"kind": "push_to_start", "audience": "a", "token": "\#(hex)"}"#, "attributes_type"),
            (#"{"kind": "push_to_start", "audience": "a\u0001", "attributes_type": "T", "token": "\#(hex)"}"#, "audience"),
            (#"{"kind": "push_to_start", "audience": "a", "attributes_type": "T", "token": "\#(hex)", "started": []}"#, "started"),
            (#"{"activity_id": "m", "audience": "a", "token": "\#(hex)"}"#, "audience"),
            (#"{"activity_id": "m", "attributes_type": "T", "token": "\#(hex)"}"#, "attributes_type"),
            (#"{"kind": "live", "activity_id": "m", "token": "\#(hex)"}"#, "kind"),
            (#"{"kind": "push_to_start", "audience": "a", "attributes_type": "T", "token": "aa"}"#, "token"),
        ]
        for (text, field) in cases {
            let json = try parse(text)
            #expect(fieldError { _ = try TokenRecord(json: json) }?.field == field, "\(text)")
        }
    }

    @Test("a start names its audiences; other events may not, and each key is checked")
    func commandAudiences() throws {
        let start = #""event": "start", "alert": {"title": "t", "body": "b"}, "attributes_type": "T", "attributes": {}"#
        let command = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": ["user-1", "followers:owls"]}"#))
        #expect(command.audiences.map(\.rawValue) == ["user-1", "followers:owls"])
        #expect(try ActivityCommand(json: command.json) == command)
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", "audiences": ["user-1"]}"#)) }?.field == "audiences")
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": ["a", 3]}"#)) }?.field == "audiences[1]")
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": ["a", ""]}"#)) }?.field == "audiences[1]")
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": ["a", "a"]}"#)) }?.field == "audiences")
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": "a"}"#)) }?.field == "audiences")
        let many = (0...ActivityCommand.maxAudiences).map { "\"a\($0)\"" }.joined(separator: ",")
        #expect(fieldError { _ = try ActivityCommand(json: parse(#"{"activity_id": "m", \#(start), "audiences": [\#(many)]}"#)) }?.field == "audiences")
    }

    @Test("an audience start carries the whole start and reads back; a missing part is named")
    func audienceStart() throws {
        let push = LiveActivityPush(
            activityID: try ActivityID("match-1"), version: 3, event: .start, contentState: ["teamOneScore": 0],
            timestamp: UnixTime(seconds: 1_764_000_000), priority: .normal, staleDate: UnixTime(seconds: 1_764_003_600),
            relevanceScore: 50, alert: ActivityAlert(title: "Kick-off", body: "Owls v Hawks", sound: "default"),
            attributesType: "SportsActivityAttributes", attributes: ["teamOneName": "Owls"], inputPushChannel: "chan")
        let start = AudienceStart(audience: try AudienceKey("followers:owls"), push: push)
        #expect(start.push.inputPushToken == true)
        let read = try AudienceStart(json: start.json)
        #expect(read == start)
        let aps = APNsPayload.aps(for: read.push)
        #expect(aps["input-push-token"] == 1)
        #expect(aps["attributes-type"] == "SportsActivityAttributes")
        #expect(aps["event"] == "start")
        guard case .object(var emptyType) = start.json else { return }
        emptyType["attributes_type"] = ""
        #expect(fieldError { _ = try AudienceStart(json: .object(emptyType)) }?.field == "attributes_type")
        for field in ["alert", "attributes", "attributes_type", "content_state", "timestamp", "audience", "version"] {
            guard case .object(var fields) = start.json else { return }
            fields.removeValue(forKey: field)
            #expect(fieldError { _ = try AudienceStart(json: .object(fields)) }?.field.hasPrefix(field) == true, "\(field)")
        }
    }
}

@Suite("PartitionDispatcher push-to-start")
struct PartitionDispatcherPushToStartTests {
    let fanA = try! DeviceToken(hex: String(repeating: "fa01", count: 16))
    let fanB = try! DeviceToken(hex: String(repeating: "fb02", count: 16))
    let otherApp = try! DeviceToken(hex: String(repeating: "0c03", count: 16))
    let updateToken = try! DeviceToken(hex: String(repeating: "ad04", count: 16))

    func pushToStart(_ token: DeviceToken, audience: String = "followers:owls", type: String = "SportsActivityAttributes", action: String = "register") -> String {
        #"{"kind": "push_to_start", "audience": "\#(audience)", "attributes_type": "\#(type)", "token": "\#(token.hex)", "action": "\#(action)"}"#
    }

    func start(_ activity: String, audiences: [String] = ["followers:owls"]) -> String {
        let list = audiences.map { "\"\($0)\"" }.joined(separator: ", ")
        return #"{"activity_id": "\#(activity)", "event": "start", "content_state": {"teamOneScore": 0}, "alert": {"title": "Kick-off", "body": "Owls v Hawks"}, "attributes_type": "SportsActivityAttributes", "attributes": {"teamOneName": "Owls"}, "audiences": [\#(list)]}"#
    }

    /// Registers the two fans and a token of another attributes type.
    func registered(_ configuration: PartitionDispatcher.Configuration = .init()) -> DispatcherHarness {
        var harness = DispatcherHarness(configuration: configuration)
        harness.restore()
        harness.token(0, pushToStart(fanA))
        harness.token(1, pushToStart(fanB))
        harness.token(2, pushToStart(otherApp, type: "DeliveryActivityAttributes"))
        return harness
    }

    /// Delivers every audience start produced so far, from `offset` on.
    func deliverStarts(_ harness: inout DispatcherHarness, from offset: Int64 = 0) {
        for (index, produce) in harness.produced(on: .starts).enumerated() where Int64(index) >= offset {
            harness.audienceStart(Int64(index), produce.value ?? [])
        }
    }

    @Test("a start to an audience sends each push-to-start token of its type one start with input-push-token, after its ledger is stored")
    func startToAudience() throws {
        var harness = registered()
        #expect(harness.produced(on: .tokenStore).map(\.key) == ["followers:owls\u{1E}\(fanA.hex)", "followers:owls\u{1E}\(fanB.hex)", "followers:owls\u{1E}\(otherApp.hex)"])
        #expect(harness.commits[.tokens] == 3)

        harness.holdAcks = true
        harness.command(0, start("match-1"))
        let starts = harness.produced(on: .starts)
        #expect(starts.map(\.key) == ["followers:owls"])
        #expect(starts[0].partition == nil, "the producer's murmur2 partitioner places it by the audience key")
        #expect(harness.produced(on: .state).isEmpty, "the snapshot waits for the audience start to be acknowledged")
        harness.releaseAcks()
        #expect(harness.produced(on: .state).count == 1)
        #expect(harness.commits[.commands] == nil)
        harness.releaseAcks()
        #expect(harness.commits[.commands] == 1)

        harness.audienceStart(0, starts[0].value ?? [])
        #expect(harness.sent.isEmpty, "no start before the ledger is stored")
        let ledgers = harness.produced(on: .tokenStore).suffix(2)
        #expect(ledgers.map(\.key) == ["followers:owls\u{1E}\(fanA.hex)", "followers:owls\u{1E}\(fanB.hex)"])
        let stored = try JSONValue.parse(ledgers.first?.value ?? [])
        #expect(stored["started"]?.arrayValue?.first?["activity_id"] == "match-1")
        harness.releaseAcks()

        #expect(harness.sent.map(\.token) == [fanA, fanB])
        for send in harness.sent {
            let aps = try JSONValue.parse(send.payload)["aps"]
            #expect(aps?["event"] == "start")
            #expect(aps?["input-push-token"] == 1)
            #expect(aps?["attributes-type"] == "SportsActivityAttributes")
            #expect(aps?["attributes"] == ["teamOneName": "Owls"])
            #expect(aps?["alert"]?["title"] == "Kick-off")
            #expect(aps?["content-state"] == ["teamOneScore": 0])
            #expect(send.audienceStart == 0)
        }
        #expect(harness.commits[.starts] == 1)
        #expect(harness.observations.contains(.audienceStarted(try ActivityID("match-1"), audience: try AudienceKey("followers:owls"), delivered: [fanA, fanB], alreadyStarted: 0)))
        #expect(harness.dispatcher.isIdle)
    }

    @Test("a repeated start, and the same audience start after a restart, send no second start")
    func neverTwice() throws {
        var harness = registered()
        harness.command(0, start("match-1"))
        deliverStarts(&harness)
        #expect(harness.sent.count == 2)
        harness.command(1, start("match-1"))
        deliverStarts(&harness, from: 1)
        #expect(harness.sent.count == 2)
        #expect(harness.observations.last { if case .audienceStarted = $0 { true } else { false } }
            == .audienceStarted(try ActivityID("match-1"), audience: try AudienceKey("followers:owls"), delivered: [], alreadyStarted: 2))
        #expect(harness.commits[.starts] == 2)

        // A new owner restores token-store (newest value per key) and is re-delivered the first audience start.
        var latest: [String: [UInt8]?] = [:]
        for produce in harness.produced(on: .tokenStore) { latest[produce.key] = produce.value }
        var restarted = DispatcherHarness()
        for (key, value) in latest.sorted(by: { $0.key < $1.key }) { restarted.dispatcher.restoreToken(key: key, value: value) }
        restarted.run(restarted.dispatcher.finishRestore(now: restarted.now))
        #expect(restarted.dispatcher.pushToStartTokens(of: try AudienceKey("followers:owls")) == [otherApp, fanA, fanB].sorted())
        restarted.audienceStart(0, harness.produced(on: .starts)[0].value ?? [])
        #expect(restarted.sent.isEmpty)
        #expect(restarted.commits[.starts] == 1)
    }

    @Test("over max_starts_per_hour a token's start is dead-lettered start-rate-limited")
    func rateLimited() throws {
        var harness = registered(PartitionDispatcher.Configuration(pushToStart: .init(maxStartsPerHour: 1)))
        harness.command(0, start("match-1"))
        harness.command(1, start("match-2"))
        deliverStarts(&harness)
        #expect(harness.sent.map(\.push.activityID.rawValue) == ["match-1", "match-1"])
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.startRateLimited, .startRateLimited])
        #expect(letters.first?.activityID?.rawValue == "match-2")
        #expect(letters.first?.message.contains("max_starts_per_hour") == true)
        #expect(harness.commits[.starts] == 2)
    }

    @Test("a push-to-start token APNs calls gone is tombstoned; an unregistered one is sent nothing")
    func gone() throws {
        var harness = registered()
        harness.outcome = { $0.token == self.fanA ? .tokenInvalid(reason: "Unregistered") : .delivered }
        harness.token(3, pushToStart(fanB, action: "unregister"))
        harness.command(0, start("match-1"))
        deliverStarts(&harness)
        #expect(harness.sent.map(\.token) == [fanA])
        let tombstones = harness.produced(on: .tokenStore).filter { $0.value == nil }.map(\.key)
        #expect(tombstones == ["followers:owls\u{1E}\(fanB.hex)", "followers:owls\u{1E}\(fanA.hex)"])
        #expect(harness.dispatcher.pushToStartTokens(of: try AudienceKey("followers:owls")) == [otherApp])
        #expect(harness.commits[.starts] == 1)
    }

    @Test("a start sent to an audience reaches the update tokens registered after it as an update, without the alert")
    func updateTokensAfterStart() throws {
        var harness = registered()
        harness.command(0, start("match-1"))
        deliverStarts(&harness)
        harness.token(3, #"{"activity_id": "match-1", "token": "\#(updateToken.hex)"}"#)
        let catchUp = try #require(harness.sent.last)
        #expect(catchUp.token == updateToken)
        let aps = try JSONValue.parse(catchUp.payload)["aps"]
        #expect(aps?["event"] == "update")
        #expect(aps?["alert"] == nil)
        #expect(aps?["content-state"] == ["teamOneScore": 0])
        harness.command(1, #"{"activity_id": "match-1", "content_state": {"teamOneScore": 1}}"#)
        harness.advance(by: 0.3)
        #expect(harness.sent.last?.token == updateToken)
        #expect(try JSONValue.parse(harness.sent.last?.payload ?? [])["aps"]?["content-state"] == ["teamOneScore": 1])
    }

    @Test("an audience start keyed by something else than its audience is dead-lettered")
    func wrongKey() throws {
        var harness = registered()
        harness.command(0, start("match-1"))
        let value = harness.produced(on: .starts)[0].value ?? []
        harness.run(harness.dispatcher.audienceStartRecord(.init(offset: 0, key: Array("match-1".utf8), value: value, timestamp: harness.now), now: harness.now))
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.invalidCommand])
        #expect(letters.first?.message.contains("keyed by audience key") == true)
        #expect(harness.sent.isEmpty)
    }
}
