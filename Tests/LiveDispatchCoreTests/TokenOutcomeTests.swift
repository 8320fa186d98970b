@testable import LiveDispatchCore
import Testing

/// Each token's last outcome, as the dispatcher records it in `token-store`
/// (failures and the delivery after one, nothing else) and as the read API
/// shows it (recorded, or derived from the newest push summary).
@Suite("Token outcomes")
struct TokenOutcomeTests {
    let match = try! ActivityID("match-42")
    let healthy = try! DeviceToken(hex: String(repeating: "aa01", count: 16))
    let broken = try! DeviceToken(hex: String(repeating: "bb02", count: 16))

    func registration(_ token: DeviceToken) -> TokenRegistration {
        TokenRegistration(activityID: match, token: token, registeredAt: UnixTime(seconds: 1_763_999_000))
    }

    /// The token-store records written since `index`, as registrations.
    func records(_ harness: DispatcherHarness, from index: Int = 0) throws -> [TokenRegistration] {
        try harness.produced.dropFirst(index).filter { $0.topic == .tokenStore }.map { try TokenRegistration(bytes: $0.value ?? []) }
    }

    @Test("a failure is written in the token's record before the snapshot; deliveries write nothing until the failed token is delivered again")
    func writtenOnChange() throws {
        var harness = DispatcherHarness()
        var failing = true
        harness.outcome = { [broken] send in send.token == broken && failing ? .permanent(reason: "BadDeviceToken") : .delivered }
        harness.restore(tokens: [registration(healthy), registration(broken)])
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"n": 1}}"#)
        harness.advance(by: 1)

        let failed = try records(harness)
        #expect(failed.count == 1)
        #expect(failed.first?.token == broken)
        #expect(failed.first?.registeredAt == UnixTime(seconds: 1_763_999_000), "the record keeps the registration")
        #expect(failed.first?.lastOutcome == TokenOutcome(result: .failed, reason: "BadDeviceToken", version: 1, event: .update, at: harness.now))
        let tokenStoreIndex = try #require(harness.produced.firstIndex { $0.topic == .tokenStore })
        let snapshotIndex = try #require(harness.produced.firstIndex { $0.topic == .state })
        #expect(tokenStoreIndex < snapshotIndex, "a reader that sees the snapshot sees the failure")

        var mark = harness.produced.count
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"n": 2}}"#)
        harness.advance(by: 1)
        #expect(try records(harness, from: mark).map(\.lastOutcome?.version) == [2], "a second failure is written again")

        failing = false
        mark = harness.produced.count
        harness.command(2, #"{"activity_id": "match-42", "content_state": {"n": 3}}"#)
        harness.advance(by: 1)
        let recovered = try records(harness, from: mark)
        #expect(recovered.map(\.token) == [broken])
        #expect(recovered.first?.lastOutcome == TokenOutcome(result: .delivered, version: 3, event: .update, at: harness.now))

        mark = harness.produced.count
        harness.command(3, #"{"activity_id": "match-42", "event": "end"}"#)
        harness.advance(by: 1)
        #expect(try records(harness, from: mark).isEmpty, "deliveries to tokens without a recorded failure are not written")
        #expect(harness.produced(on: .state).count == 4)
    }

    @Test("a recorded failure survives a restore; a re-registration of the failed token sends it the current state; an outcome sent on tokens is ignored")
    func keptAcrossRestoreAndRegistration() throws {
        var harness = DispatcherHarness()
        harness.outcome = { _ in .delivered }
        var stored = registration(broken)
        let failure = TokenOutcome(result: .failed, reason: "TooManyRequests", version: 4, event: .update, at: UnixTime(seconds: 1_763_999_500))
        stored.lastOutcome = failure
        let state = ActivityState(activityID: match, contentState: ["n": 4], version: 4, createdAt: harness.now)
        harness.restore(states: [state], tokens: [stored, registration(healthy)])

        let claimed = #"{"result": "delivered", "version": 9, "kind": "end", "at": 1763999999}"#
        harness.token(0, #"{"activity_id": "match-42", "token": "\#(broken.hex)", "last_outcome": \#(claimed)}"#)
        harness.token(1, #"{"activity_id": "match-42", "token": "\#(healthy.hex)", "last_outcome": \#(claimed)}"#)
        // The broken token registered again keeps its failure and is sent
        // the current state, whose delivery its record then names.
        let registered = try records(harness)
        #expect(registered.map(\.token) == [broken, broken, healthy])
        #expect(registered.map(\.lastOutcome) == [failure, TokenOutcome(result: .delivered, version: 4, event: .update, at: harness.now), nil])
        #expect(harness.sent.map(\.token) == [broken])

        let mark = harness.produced.count
        harness.command(5, #"{"activity_id": "match-42", "content_state": {"n": 5}}"#)
        harness.advance(by: 1)
        #expect(try records(harness, from: mark).isEmpty, "both tokens' records are clear: deliveries write nothing")
    }

    @Test("the shown outcome: a recorded failure, else the newest push when the token was registered before it, else the recorded delivery")
    func shown() {
        let push = PushSummary(version: 7, event: .end, completedAt: UnixTime(seconds: 2000), commands: 1, delivered: 2)
        let derived = TokenOutcome(result: .delivered, version: 7, event: .end, at: UnixTime(seconds: 2000))
        let failure = TokenOutcome(result: .failed, reason: "BadDeviceToken", version: 6, event: .update, at: UnixTime(seconds: 1500))
        let delivery = TokenOutcome(result: .delivered, version: 6, event: .update, at: UnixTime(seconds: 1500))
        let newer = TokenOutcome(result: .delivered, version: 8, event: .update, at: UnixTime(seconds: 2100))

        #expect(TokenOutcome.shown(recorded: failure, registeredAt: nil, latestPush: push) == failure)
        #expect(TokenOutcome.shown(recorded: delivery, registeredAt: nil, latestPush: push) == derived)
        #expect(TokenOutcome.shown(recorded: newer, registeredAt: nil, latestPush: push) == newer)
        #expect(TokenOutcome.shown(recorded: nil, registeredAt: UnixTime(seconds: 1000), latestPush: push) == derived)
        #expect(TokenOutcome.shown(recorded: nil, registeredAt: UnixTime(seconds: 2500), latestPush: push) == nil, "registered after the push")
        #expect(TokenOutcome.shown(recorded: nil, registeredAt: nil, latestPush: nil) == nil)
        #expect(TokenOutcome.shown(recorded: delivery, registeredAt: nil, latestPush: nil) == delivery)
    }

    @Test("a stored outcome is read strictly, naming the bad field")
    func decoding() throws {
        let outcome = TokenOutcome(result: .failed, reason: String(repeating: "r", count: 300), version: 3, event: .start, at: UnixTime(seconds: 12.5))
        #expect(outcome.reason?.count == TokenOutcome.reasonLength)
        #expect(try TokenOutcome(json: outcome.json) == outcome)

        func error(_ outcome: JSONValue) -> String? {
            let record: JSONValue = ["activity_id": "match-42", "token": .string(healthy.hex), "last_outcome": outcome]
            do {
                _ = try TokenRegistration(json: record)
                return nil
            } catch {
                return error.field
            }
        }
        #expect(error(["result": "lost", "version": 1, "kind": "update", "at": 1]) == "last_outcome.result")
        #expect(error(["result": "failed", "version": -1, "kind": "update", "at": 1]) == "last_outcome.version")
        #expect(error(["result": "failed", "version": 1, "kind": "sideways", "at": 1]) == "last_outcome.kind")
        #expect(error(["result": "failed", "version": 1, "kind": "update", "at": 1e300]) == "last_outcome.at")
        #expect(error(["result": "failed", "version": 1, "kind": "update", "at": 1, "extra": true]) == "last_outcome.extra")
        #expect(error("failed") == "last_outcome")
    }
}
