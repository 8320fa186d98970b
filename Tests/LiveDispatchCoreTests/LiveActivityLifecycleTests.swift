import LiveDispatchCore
import Testing

/// A start that failed is never replaced by an update, the retry budget is
/// per (token, version), and an end carries only what its own command set.
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

    @Test("a token whose start failed for good is sent the next update as a start, with the newest state")
    func permanentStartFailure() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, .start, score: 0), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(1), jitter: 0)
        _ = fanOut.completed(token: b, version: 1, outcome: .permanent(reason: "InternalServerError"), now: time(1), jitter: 0)
        let next = sends(fanOut.publish(push(2, .update, score: 1), now: time(2)))
        #expect(next[a]?.event == .update, "a token that got its start gets updates")
        #expect(next[b]?.event == .start, "a token that never got its start gets a start")
        #expect(next[b]?.contentState == ["score": 1])
        #expect(next[b]?.attributesType == "MatchAttributes")
        #expect(next[b]?.version == 2)
        let payload = APNsPayload.aps(for: next[b] ?? push(0, .update, score: 0))
        #expect(payload["attributes"] == attributes, "the start carries the activity's attributes")

        _ = fanOut.completed(token: b, version: 2, outcome: .delivered, now: time(3), jitter: 0)
        let third = sends(fanOut.publish(push(3, .update, score: 2), now: time(4)))
        #expect(third[b]?.event == .update, "once the start is delivered, updates flow")
    }

    @Test("a retried start stays a start when an update supersedes it")
    func retriedStart() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, .start, score: 0), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0)
        let wake = fanOut.completed(token: b, version: 1, outcome: .retryable(reason: "TooManyRequests", after: nil), now: time(0), jitter: 1)
        #expect(wake == [.wake(at: time(1))])
        _ = fanOut.publish(push(2, .update, score: 3), now: time(0.5))
        let retry = sends(fanOut.timerFired(now: time(1)))
        #expect(retry[b]?.event == .start)
        #expect(retry[b]?.contentState == ["score": 3], "the retry carries the newest content-state")
    }

    @Test("a token that never got its start is not sent the end, and the end still completes")
    func endWithoutStart() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, .start, score: 0), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0)
        _ = fanOut.completed(token: b, version: 1, outcome: .permanent(reason: "InternalServerError"), now: time(0), jitter: 0)
        let end = fanOut.publish(push(2, .end, score: 4), now: time(1))
        #expect(Array(sends(end).keys) == [a])
        #expect(fanOut.completed(token: a, version: 2, outcome: .delivered, now: time(1), jitter: 0) == [.completed(through: 2)])
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

    @Test("an end carries only its own stale date, relevance and dismissal date")
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
        let expiration = APNsRequest.expiration(of: ended.push)
        #expect(expiration >= time(1_920), "APNs keeps the end at least until its dismissal date")
        #expect(expiration == time(1_020) + APNsRequest.defaultEndLifetime)

        var far = ended.push
        far.dismissalDate = time(1_020 + 6 * 3600)
        #expect(APNsRequest.expiration(of: far) == time(1_020 + 6 * 3600))

        let other = ActivityCommand(activityID: try ActivityID("match-8"), contentState: ["score": 0], staleDate: time(2_500))
        _ = coalescer.receive(other, offset: 3, recordTime: time(1_990), now: time(1_990))
        let bare = ActivityCommand(activityID: try ActivityID("match-8"), event: .end, contentState: ["score": 0])
        let bareEnd = try #require(coalescer.receive(bare, offset: 4, recordTime: time(2_000), now: time(2_000)).flushed)
        #expect(bareEnd.push.staleDate == nil)
        #expect(bareEnd.push.dismissalDate == nil)
        #expect(APNsRequest.expiration(of: bareEnd.push) == time(2_000) + APNsRequest.defaultEndLifetime)
    }

    @Test("an update's expiration is its stale date, else eight hours after its event")
    func updateExpiration() {
        var update = push(1, .update, score: 0)
        #expect(APNsRequest.expiration(of: update) == time(1) + APNsRequest.defaultUpdateLifetime)
        update.staleDate = time(600)
        #expect(APNsRequest.expiration(of: update) == time(600))
    }
}
