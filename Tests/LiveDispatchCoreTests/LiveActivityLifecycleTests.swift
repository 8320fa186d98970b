import LiveDispatchCore
import Testing

/// Update tokens take updates and ends only, the retry budget is per
/// (token, version), an end carries what its own command set (and the
/// dismissal date an update gave), and `apns-expiration` is counted from
/// when a push is sent.
@Suite("Live Activity lifecycle")
struct LiveActivityLifecycleTests {
    let activity = try! ActivityID("match-7")
    let a = try! DeviceToken(hex: "aa")
    let b = try! DeviceToken(hex: "bb")
    let attributes: JSONValue = ["home": "Owls", "away": "Hawks"]

    func push(_ version: UInt64, _ event: ActivityEvent, score: Int64) -> LiveActivityPush {
        LiveActivityPush(
            activityID: activity, version: version, event: event, contentState: ["score": .integer(score)],
            timestamp: time(Double(version)), attributesType: "MatchAttributes", attributes: attributes)
    }

    func fanOut(retry: RetryPolicy = RetryPolicy(maxAttempts: 3, maxElapsed: 1_000, baseDelay: 1, maxDelay: 1)) -> FanOut {
        var fanOut = FanOut(activityID: activity, configuration: .init(retry: retry))
        for token in [a, b] { _ = fanOut.addToken(token, sendCurrent: false, now: time(0)) }
        return fanOut
    }

    func sends(_ actions: [FanOut.Action]) -> [DeviceToken: LiveActivityPush] {
        var sends: [DeviceToken: LiveActivityPush] = [:]
        for case .send(let token, let push) in actions { sends[token] = push }
        return sends
    }

    @Test("update tokens are planned a start as an update of the same state, never a start")
    func startToUpdateTokens() throws {
        var harness = DispatcherHarness()
        let token = try DeviceToken(hex: String(repeating: "aa01", count: 16))
        harness.restore(tokens: [TokenRegistration(activityID: activity, token: token)])
        harness.command(0, #"{"activity_id": "match-7", "event": "start", "content_state": {"score": 0}, "attributes_type": "MatchAttributes", "attributes": {"home": "Owls"}, "alert": {"title": "Kick-off", "body": "Owls v Hawks"}}"#)
        let send = try #require(harness.sent.first)
        #expect(send.push.event == .update)
        let payload = try JSONValue.parse(send.payload)["aps"]
        #expect(payload?["event"] == "update")
        #expect(payload?["content-state"] == ["score": 0])
        #expect(payload?["attributes"] == nil, "an update token's push carries no attributes")
        #expect(payload?["attributes-type"] == nil)
        #expect(payload?["alert"]?["title"] == "Kick-off")
    }

    @Test("a retried first version stays an update and carries the newest state")
    func retriedStart() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, .start, score: 0), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0)
        let wake = fanOut.completed(token: b, version: 1, outcome: .retryable(reason: "TooManyRequests", after: nil), now: time(0), jitter: 1)
        #expect(wake == [.wake(at: time(1))])
        _ = fanOut.publish(push(2, .update, score: 3), now: time(0.5))
        let retry = sends(fanOut.timerFired(now: time(1)))
        #expect(retry[b]?.event == .update)
        #expect(retry[b]?.contentState == ["score": 3], "the retry carries the newest content-state")
    }

    @Test("every update token is sent the end, also one whose first version failed")
    func endReachesEveryToken() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, .start, score: 0), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0)
        _ = fanOut.completed(token: b, version: 1, outcome: .permanent(reason: "InternalServerError"), now: time(0), jitter: 0)
        let end = sends(fanOut.publish(push(2, .end, score: 4), now: time(1)))
        #expect(Set(end.keys) == [a, b])
        #expect(end[b]?.event == .end)
        _ = fanOut.completed(token: a, version: 2, outcome: .delivered, now: time(1), jitter: 0)
        #expect(fanOut.completed(token: b, version: 2, outcome: .delivered, now: time(1), jitter: 0) == [.completed(through: 2)])
    }

    @Test("the retry budget is per version: a newer version gets sends of its own")
    func budgetPerVersion() {
        var fanOut = FanOut(activityID: activity, configuration: .init(retry: RetryPolicy(maxAttempts: 2, maxElapsed: 1_000, baseDelay: 1, maxDelay: 1)))
        _ = fanOut.addToken(a, sendCurrent: false, now: time(0))
        _ = fanOut.publish(push(1, .update, score: 1), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .retryable(reason: "ServiceUnavailable", after: nil), now: time(0), jitter: 0)
        _ = fanOut.publish(push(2, .update, score: 2), now: time(0.5))
        #expect(sends(fanOut.timerFired(now: time(1)))[a]?.version == 2)
        let first = fanOut.completed(token: a, version: 2, outcome: .retryable(reason: "ServiceUnavailable", after: nil), now: time(1), jitter: 1)
        #expect(first == [.wake(at: time(2))], "version 2's first failure is not the token's second")
        #expect(sends(fanOut.timerFired(now: time(2)))[a]?.version == 2)
        let second = fanOut.completed(token: a, version: 2, outcome: .retryable(reason: "ServiceUnavailable", after: nil), now: time(2), jitter: 0)
        #expect(second == [
            .deadLetter(a, push(2, .update, score: 2), reason: .retriesExhausted, detail: "ServiceUnavailable", attempts: 2),
            .completed(through: 2),
        ])
    }

    @Test("an end carries its own stale date and relevance; its dismissal date is its own, else an update's")
    func endCarriesItsOwn() throws {
        var coalescer = Coalescer(configuration: .init(window: 0))
        let id = "match-7"
        let start = ActivityCommand(
            activityID: try ActivityID(id), event: .start, contentState: ["score": 0], alert: ActivityAlert(title: "Kick-off", body: "Owls v Hawks"),
            attributesType: "MatchAttributes", attributes: attributes)
        _ = coalescer.receive(start, offset: 0, recordTime: time(1_000), now: time(1_000))
        let late = ActivityCommand(
            activityID: try ActivityID(id), contentState: ["score": 1], staleDate: time(1_600), dismissalDate: time(9_999), relevanceScore: 80)
        let updated = try #require(coalescer.receive(late, offset: 1, recordTime: time(1_010), now: time(1_010)).flushed)
        #expect(updated.push.staleDate == time(1_600))
        #expect(updated.push.relevanceScore == 80)
        #expect(updated.push.attributes == attributes, "every version carries the attributes a start would need")
        #expect(APNsPayload.aps(for: updated.push)["attributes"] == nil, "an update does not write them")

        let endCommand = ActivityCommand(activityID: try ActivityID(id), event: .end, contentState: ["score": 2], dismissalDate: time(1_920))
        let ended = try #require(coalescer.receive(endCommand, offset: 2, recordTime: time(1_020), now: time(1_020)).flushed)
        #expect(ended.push.staleDate == nil, "the update's stale date does not apply to the end")
        #expect(ended.push.relevanceScore == nil)
        #expect(ended.push.dismissalDate == time(1_920))
        let expiration = APNsRequest.expiration(of: ended.push, sentAt: time(1_020))
        #expect(expiration >= time(1_920), "APNs keeps the end at least until its dismissal date")
        #expect(expiration == time(1_020) + APNsRequest.defaultEndLifetime)

        var far = ended.push
        far.dismissalDate = time(1_020 + 6 * 3600)
        #expect(APNsRequest.expiration(of: far, sentAt: time(1_020)) == time(1_020 + 6 * 3600))

        let other = ActivityCommand(activityID: try ActivityID("match-8"), contentState: ["score": 0], staleDate: time(2_500))
        _ = coalescer.receive(other, offset: 3, recordTime: time(1_990), now: time(1_990))
        let bare = ActivityCommand(activityID: try ActivityID("match-8"), event: .end, contentState: ["score": 0])
        let bareEnd = try #require(coalescer.receive(bare, offset: 4, recordTime: time(2_000), now: time(2_000)).flushed)
        #expect(bareEnd.push.staleDate == nil)
        #expect(bareEnd.push.dismissalDate == nil)
        #expect(APNsRequest.expiration(of: bareEnd.push, sentAt: time(2_000)) == time(2_000) + APNsRequest.defaultEndLifetime)
    }

    @Test("a future dismissal date given on an update is kept for the end, and not sent before it")
    func updateDismissalReachesTheEnd() throws {
        var coalescer = Coalescer(configuration: .init(window: 0))
        let id = try ActivityID("match-9")
        _ = coalescer.receive(ActivityCommand(activityID: id, contentState: ["score": 0]), offset: 0, recordTime: time(1_000), now: time(1_000))
        let update = ActivityCommand(activityID: id, contentState: ["score": 1], dismissalDate: time(5_000))
        let updated = try #require(coalescer.receive(update, offset: 1, recordTime: time(1_010), now: time(1_010)).flushed)
        #expect(updated.push.event == .update)
        #expect(updated.push.dismissalDate == nil, "APNs reads a dismissal date only on an end")
        #expect(APNsPayload.aps(for: updated.push)["dismissal-date"] == nil)
        #expect(updated.snapshot.dismissalDate == time(5_000), "the state keeps it")
        let ended = try #require(
            coalescer.receive(ActivityCommand(activityID: id, event: .end), offset: 2, recordTime: time(1_020), now: time(1_020)).flushed)
        #expect(ended.push.dismissalDate == time(5_000))
        #expect(APNsPayload.aps(for: ended.push)["dismissal-date"] == 5_000)
    }

    @Test("an update whose dismissal date had passed when it arrived ends the activity now, with that date")
    func pastDismissalEnds() throws {
        var coalescer = Coalescer(configuration: .init(window: 1))
        let id = try ActivityID("match-10")
        _ = coalescer.receive(ActivityCommand(activityID: id, contentState: ["score": 0]), offset: 0, recordTime: time(1_000), now: time(1_000))
        let past = ActivityCommand(activityID: id, contentState: ["score": 1], dismissalDate: time(999))
        let ended = try #require(coalescer.receive(past, offset: 1, recordTime: time(1_010), now: time(1_010)).flushed)
        #expect(ended.push.event == .end)
        #expect(ended.push.dismissalDate == time(999))
        #expect(ended.push.contentState == ["score": 1])
        #expect(coalescer.state(of: id)?.endedAt == time(1_010))
    }

    @Test("an update's expiration is its stale date, else eight hours after its event, never within an hour of its send")
    func updateExpiration() {
        var update = push(1, .update, score: 0)
        #expect(APNsRequest.expiration(of: update, sentAt: time(1)) == time(1) + APNsRequest.defaultUpdateLifetime)
        update.staleDate = time(6_000)
        #expect(APNsRequest.expiration(of: update, sentAt: time(1)) == time(6_000))
        // Sent after its stale date (a late registration, a retry): still kept an hour.
        #expect(APNsRequest.expiration(of: update, sentAt: time(7_000)) == time(7_000) + APNsRequest.minimumLifetime)
        let end = push(2, .end, score: 0)
        let late = time(2) + APNsRequest.defaultEndLifetime + 100
        #expect(APNsRequest.expiration(of: end, sentAt: late) == late + APNsRequest.minimumLifetime)
    }
}
