import Hummingbird
import HummingbirdTesting
import Kafka
@testable import LiveDispatchHTTP
import LiveDispatchCore
import Testing

@Suite("Dead letter replay")
struct DeadLetterReplayTests {
    static let tokenHex = String(repeating: "ab", count: 32)
    let activity: ActivityID
    let token: DeviceToken

    init() throws {
        activity = try ActivityID("match-42")
        token = try DeviceToken(hex: Self.tokenHex)
    }
    static let now = UnixTime(seconds: 1_770_000_000)

    let replay = DeadLetterReplay(
        id: "3-17", tokensTopic: "livedispatch.tokens", replayableTopics: ["sports.scores", "livedispatch.commands", "livedispatch.tokens"])

    /// A push failure to an update token, as the dispatcher writes it.
    func pushFailure(_ reason: DeadLetterReason, details: [String: JSONValue] = [:]) -> DeadLetter {
        var all: [String: JSONValue] = ["apns.reason": "ServiceUnavailable", "attempts": 5, "version": 3, "priority": 10]
        all.merge(details) { _, given in given }
        return DeadLetter(
            reason: reason, message: "push version 3 of activity match-42 to token \(Self.tokenHex) failed: ServiceUnavailable",
            activityID: activity, token: token, details: all, deadLetteredAt: Self.now)
    }

    func stored(app: String? = nil, expiresAt: UnixTime? = nil) -> TokenRegistration {
        TokenRegistration(
            activityID: activity, token: token, environment: .sandbox, expiresAt: expiresAt, registeredAt: UnixTime(seconds: 1_769_990_000),
            lastOutcome: TokenOutcome(result: .failed, reason: "ServiceUnavailable", version: 3, event: .update, at: Self.now), app: app)
    }

    func refusal(_ decision: DeadLetterReplay.Decision) -> DeadLetterReplay.Refusal? {
        if case .refused(let refusal) = decision { return refusal }
        return nil
    }

    @Test("a push that failed for good to an update token is replayed by re-registering the token", arguments: [
        DeadLetterReason.retriesExhausted, .apnsRejected,
    ])
    func pushFailureReregisters(reason: DeadLetterReason) {
        #expect(replay.decide(pushFailure(reason)) == .reregister(activity, token))
    }

    @Test("the re-registration is the token's stored record as a register on tokens, keyed by the activity, without its outcome")
    func reregistrationRecord() throws {
        let registered = stored(app: "sports", expiresAt: UnixTime(seconds: 1_770_003_600))
        let record = try replay.reregistration(
            of: pushFailure(.retriesExhausted), activity: activity, token: token, stored: registered, now: Self.now).get()
        #expect(record.topic == "livedispatch.tokens")
        #expect(record.key == "match-42")
        let registration = try TokenRegistration(bytes: record.value)
        #expect(registration.action == .register)
        #expect(registration.activityID == activity)
        #expect(registration.token == token)
        #expect(registration.environment == .sandbox)
        #expect(registration.app == "sports")
        #expect(registration.expiresAt == UnixTime(seconds: 1_770_003_600))
        #expect(registration.registeredAt == UnixTime(seconds: 1_769_990_000))
        #expect(registration.lastOutcome == nil)
    }

    @Test("a token no longer registered, or expired, is not re-registered (409 token-not-registered)")
    func tokenGone() {
        let letter = pushFailure(.retriesExhausted)
        let gone = replay.reregistration(of: letter, activity: activity, token: token, stored: nil, now: Self.now)
        #expect(throws: DeadLetterReplay.Refusal.self) { try gone.get() }
        if case .failure(let refusal) = gone {
            #expect(refusal.code == "token-not-registered")
            #expect(refusal.message.contains("POST /v1/tokens"))
        }
        let expired = replay.reregistration(
            of: letter, activity: activity, token: token, stored: stored(expiresAt: UnixTime(seconds: 1_769_999_999)), now: Self.now)
        if case .failure(let refusal) = expired {
            #expect(refusal.code == "token-not-registered")
            #expect(refusal.message.contains("expired at 2026-02-02T02:39:59Z"))
        } else {
            Issue.record("an expired token was re-registered")
        }
    }

    @Test("with several apps, a stored record naming none takes the letter's app, else the replay is refused")
    func severalApps() throws {
        var replay = self.replay
        replay.apps = AppDirectory([.init(name: "sports"), .init(name: "rides")])
        let withoutApp = replay.reregistration(
            of: pushFailure(.retriesExhausted), activity: activity, token: token, stored: stored(), now: Self.now)
        if case .failure(let refusal) = withoutApp {
            #expect(refusal.code == "not-replayable")
            #expect(refusal.message.contains("app: is required"))
        } else {
            Issue.record("a registration naming no app was produced for a deployment of several apps")
        }
        let named = try replay.reregistration(
            of: pushFailure(.retriesExhausted, details: ["app": "rides"]), activity: activity, token: token,
            stored: stored(), now: Self.now
        ).get()
        #expect(try TokenRegistration(bytes: named.value).app == "rides")
    }

    @Test("a failed start to a push-to-start token is refused: its ledger keeps the start")
    func pushToStartFailure() {
        let letter = pushFailure(.retriesExhausted, details: ["audience": "user-1"])
        let refusal = refusal(replay.decide(letter))
        #expect(refusal?.code == "not-replayable")
        #expect(refusal?.message.contains("in audience user-1") == true)
        #expect(refusal?.message.contains("ledger") == true)
    }

    @Test("a start refused by the budget is refused, naming when the token may be started again")
    func startRateLimited() {
        let letter = DeadLetter(
            reason: .startRateLimited, message: "m", activityID: activity, token: token,
            details: ["audience": "user-1", "limit": 10, "next_allowed_at": .double(1_770_000_600)], deadLetteredAt: Self.now)
        let refusal = refusal(replay.decide(letter))
        #expect(refusal?.code == "not-replayable")
        #expect(refusal?.message.contains("send the start of activity match-42 to audience user-1 again after 2026-02-02T02:50:00Z") == true)
    }

    @Test("channel letters are refused with what to do instead")
    func channels() {
        let created = DeadLetter(
            reason: .channelCreateFailed, message: "m", activityID: activity,
            details: ["apns.reason": "TooManyChannels", "environment": "production"], deadLetteredAt: Self.now)
        #expect(refusal(replay.decide(created))?.message.contains("created only when its activity starts") == true)
        let deleted = DeadLetter(
            reason: .channelDeleteFailed, message: "m", activityID: activity,
            details: ["channel_id": "Y2g=", "environment": "sandbox", "apns.reason": "InternalServerError"], deadLetteredAt: Self.now)
        #expect(refusal(replay.decide(deleted))?.message.contains("`livedispatch channels delete Y2g= --environment sandbox`") == true)
        let refused = DeadLetter(
            reason: .apnsRejected, message: "m", activityID: activity,
            details: ["channel_id": "Y2g=", "apns.reason": "ChannelNotRegistered"], deadLetteredAt: Self.now)
        #expect(refusal(replay.decide(refused))?.message.contains("broadcast channel Y2g=") == true)
        for letter in [created, deleted, refused] { #expect(refusal(replay.decide(letter))?.code == "not-replayable") }
    }

    @Test("an original record is produced again to its topic; a cut one, one from another topic or none are refused")
    func originals() {
        let origin = DeadLetter.Origin(topic: "sports.scores", partition: 1, offset: 9, key: "k", value: #"{"match_id":"m"}"#)
        let letter = DeadLetter(reason: .ruleError, message: "m", origin: origin, deadLetteredAt: Self.now)
        #expect(replay.decide(letter) == .produce(.init(topic: "sports.scores", key: "k", value: Array(#"{"match_id":"m"}"#.utf8))))
        var cut = letter
        cut.details["truncated"] = true
        #expect(refusal(replay.decide(cut))?.code == "truncated")
        var other = letter
        other.origin?.topic = "billing"
        #expect(refusal(replay.decide(other))?.code == "topic-not-replayable")
        let none = DeadLetter(reason: .produceRefused, message: "m", activityID: activity, deadLetteredAt: Self.now)
        #expect(refusal(replay.decide(none))?.code == "no-original")
        let tooLarge = DeadLetter(reason: .payloadTooLarge, message: "m", activityID: activity, details: ["size": 5000], deadLetteredAt: Self.now)
        #expect(refusal(replay.decide(tooLarge))?.message.contains("over APNs' payload limit") == true)
    }

    @Test("the token's newest token-store record counts; a tombstone forgets it; other keys are ignored")
    func storedQuery() {
        var query = StoredTokenQuery(activity: activity, token: token)
        let key = Array(TokenRegistration.storeKey(activity, token).utf8)
        query.consider(key: key, value: stored().json.serialized())
        query.consider(key: Array("other\u{1F}\(Self.tokenHex)".utf8), value: nil)
        #expect(query.registration?.environment == .sandbox)
        query.consider(key: key, value: nil)
        #expect(query.registration == nil)
    }

    @Test("POST replay of a retries-exhausted letter produces a register of the token to tokens; a rate-limited start is a 409")
    func overHTTP() async throws {
        let store = KafkaRecord(
            topic: "livedispatch.token-store", partition: 0, offset: 4,
            key: Array(TokenRegistration.storeKey(activity, token).utf8), value: stored().json.serialized())
        let limited = DeadLetter(
            reason: .startRateLimited, message: "m", activityID: activity, token: token,
            details: ["audience": "user-1", "next_allowed_at": .double(1_770_000_600)], deadLetteredAt: Self.now)
        let letters = [
            KafkaRecord(topic: "livedispatch.dead-letters", partition: 0, offset: 1, key: nil, value: pushFailure(.retriesExhausted).serialized()),
            KafkaRecord(topic: "livedispatch.dead-letters", partition: 0, offset: 2, key: nil, value: limited.serialized()),
        ]
        let server = try InProcessServer(records: ["livedispatch.dead-letters": letters, "livedispatch.token-store": [store]])
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/v1/dead-letters/0-1/replay", method: .post, headers: InProcessServer.bearer("admin-key")) { response in
                #expect(response.status == .accepted)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["topic"] == "livedispatch.tokens")
            }
            try await client.execute(uri: "/v1/dead-letters/0-2/replay", method: .post, headers: InProcessServer.bearer("admin-key")) { response in
                #expect(response.status == .conflict)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["error"] == "not-replayable")
            }
        }
        let produced = server.producedRecords
        #expect(produced.count == 1)
        #expect(produced.first?.topic == "livedispatch.tokens")
        #expect(produced.first.map { String(decoding: $0.key, as: UTF8.self) } == "match-42")
        let registration = try #require(produced.first.map { try TokenRegistration(bytes: $0.value) })
        #expect(registration.action == .register)
        #expect(registration.token == token)
        #expect(registration.environment == .sandbox)
    }
}
