@testable import LiveDispatchCore
import Testing

/// The activity lifecycle: the machine called directly, then through the
/// partition's machine (the dispatcher harness plays Kafka and APNs).
@Suite("Activity lifecycle")
struct ActivityLifecycleTests {
    let match = try! ActivityID("match-42")
    let tokenA = try! DeviceToken(hex: String(repeating: "aa01", count: 16))
    let tokenB = try! DeviceToken(hex: String(repeating: "bb02", count: 16))
    let t0 = 1_764_000_000.0

    func state(endedAt: Double? = nil, dismissal: Double? = nil, version: UInt64 = 3) -> ActivityState {
        var state = ActivityState(
            activityID: match, version: version, timestamp: time(t0), dismissalDate: dismissal.map(time), createdAt: time(t0),
            endedAt: endedAt.map(time), lastOffset: 7)
        state.contentState = ["score": 1]
        return state
    }

    // MARK: The machine

    @Test("ending → ended only when the end reached every token; dismissed only when quiet, then forgotten max_age after the end")
    func phases() {
        var lifecycle = ActivityLifecycle(configuration: .init(maxAge: 12 * 3600, endedRetention: 4 * 3600))
        lifecycle.applied(state())
        #expect(lifecycle.phase(of: match) == .live(createdAt: time(t0)))
        lifecycle.applied(state(endedAt: t0 + 10, dismissal: t0 + 10))
        guard case .ending(let ending)? = lifecycle.phase(of: match) else {
            Issue.record("an end makes the activity ending")
            return
        }
        #expect(ending.version == 3)
        #expect(ending.dismissAt == time(t0 + 10))
        // Its dismissal date has passed, but the end has not reached every token.
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in true }).isEmpty)
        lifecycle.completed(match, through: 2)
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in true }).isEmpty, "an older version's completion is not the end's")
        lifecycle.completed(match, through: 3)
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in false }).isEmpty, "a token registered since is still being sent the end")
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in true }) == [.dismiss(match)])
        let marker = lifecycle.dismiss(state(endedAt: t0 + 10, dismissal: t0 + 10), now: time(t0 + 100))
        #expect(marker.forgetAt == time(t0 + 10 + 12 * 3600))
        #expect(lifecycle.markerCount == 1)
        #expect(lifecycle.due(now: time(t0 + 10 + 12 * 3600 - 1), isIdle: { _ in true }).isEmpty)
        #expect(lifecycle.due(now: time(t0 + 10 + 12 * 3600), isIdle: { _ in true }) == [.forget(match)])
        lifecycle.forget(match)
        #expect(lifecycle.phase(of: match) == nil)
    }

    @Test("a dismissed id refuses late commands, knows re-deliveries, and takes a start as a new life")
    func markerAdmission() throws {
        var lifecycle = ActivityLifecycle()
        lifecycle.restore(ActivityState(marker: .init(
            endedAt: time(t0), dismissedAt: time(t0 + 5), version: 3, timestamp: time(t0), lastOffset: 7, forgetAt: time(t0 + 3600)),
            of: match, createdAt: time(t0 - 60)))
        let update = ActivityCommand(activityID: match, contentState: ["score": 2])
        #expect(lifecycle.admission(of: update, offset: 7) == .alreadyApplied)
        guard case .refuse(let message) = lifecycle.admission(of: update, offset: 8) else {
            Issue.record("a late update for a dismissed id is refused")
            return
        }
        #expect(message.contains("match-42"))
        let start = ActivityCommand(activityID: match, event: .start, contentState: ["score": 0])
        guard case .restart(let marker) = lifecycle.admission(of: start, offset: 9) else {
            Issue.record("a start begins the id again")
            return
        }
        #expect(marker.version == 3)
    }

    @Test("a live activity past max_age expires only once quiet; an ended one is dismissed by max_age at the latest")
    func maxAge() {
        var lifecycle = ActivityLifecycle(configuration: .init(maxAge: 100, endedRetention: 1_000))
        lifecycle.applied(state())
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in false }).isEmpty)
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in true }) == [.expire(match)])
        lifecycle.applied(state(endedAt: t0 + 50))
        lifecycle.completed(match, through: 3)
        #expect(lifecycle.due(now: time(t0 + 99), isIdle: { _ in true }).isEmpty)
        #expect(lifecycle.due(now: time(t0 + 100), isIdle: { _ in true }) == [.dismiss(match)])
    }

    @Test("a start for an ended activity: refused while its end is delivered, a new life once it is")
    func restartOfEnded() {
        var lifecycle = ActivityLifecycle()
        let ended = state(endedAt: t0 + 10)
        lifecycle.applied(ended)
        guard case .refuse = lifecycle.restart(ended, now: time(t0 + 20)) else {
            Issue.record("a start while the end is under way is refused")
            return
        }
        lifecycle.completed(match, through: 3)
        guard case .begin(let marker) = lifecycle.restart(ended, now: time(t0 + 20)) else {
            Issue.record("a start after the end was delivered begins a new life")
            return
        }
        #expect(marker.version == 3)
        #expect(marker.lastOffset == 7)
    }

    @Test("snapshots restore their phase: live, ended (its end was delivered), dismissed")
    func restoredPhases() {
        var lifecycle = ActivityLifecycle(configuration: .init(maxAge: 12 * 3600, endedRetention: 4 * 3600))
        lifecycle.restore(state())
        #expect(lifecycle.phase(of: match) == .live(createdAt: time(t0)))
        lifecycle.restore(state(endedAt: t0 + 10))
        #expect(lifecycle.phase(of: match) == .ended(.init(endedAt: time(t0 + 10), version: 3, dismissAt: time(t0 + 10 + 4 * 3600))))
        var marker = state(endedAt: t0 + 10)
        marker.dismissedAt = time(t0 + 20)
        lifecycle.restore(marker)
        guard case .dismissed(let restored)? = lifecycle.phase(of: match) else {
            Issue.record("a marker restores as dismissed")
            return
        }
        #expect(restored.forgetAt == time(t0 + 10 + 12 * 3600))
        lifecycle.forget(match)
        #expect(lifecycle.phase(of: match) == nil)
    }

    // MARK: Through the partition's machine

    func harness(retry: RetryPolicy = RetryPolicy(maxAttempts: 3, maxElapsed: 60, baseDelay: 1, maxDelay: 1)) -> DispatcherHarness {
        var harness = DispatcherHarness(configuration: .init(
            coalescer: .init(window: 0.25, maxAge: 12 * 3600), fanOut: .init(retry: retry), sweepInterval: 5))
        harness.restore(tokens: [TokenRegistration(activityID: match, token: tokenA), TokenRegistration(activityID: match, token: tokenB)])
        return harness
    }

    func dismissal(_ seconds: Double) -> String { String(Int64(seconds)) }

    @Test("an end with a past dismissal date reaches every token through retries before the activity is dropped")
    func pastDismissalWaitsForTheEnd() throws {
        var harness = harness()
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"score": 0}}"#)
        let past = dismissal(harness.now.seconds - 60)
        // tokenB fails twice, then is delivered; the sweep runs meanwhile.
        var failures = 0
        harness.outcome = { send in
            guard send.token == self.tokenB, send.push.event == .end, failures < 2 else { return .delivered }
            failures += 1
            return .retryable(reason: "ServiceUnavailable", after: nil)
        }
        harness.command(1, #"{"activity_id": "match-42", "event": "end", "content_state": {"score": 1}, "dismissal_date": \#(past)}"#)
        for _ in 0..<10 { harness.advance(by: 1) }
        let ends = harness.sent.filter { $0.push.event == .end }
        #expect(ends.filter { $0.token == tokenA }.count == 1)
        #expect(ends.filter { $0.token == tokenB }.count == 3, "the end is retried until delivered")
        #expect(harness.sent.allSatisfy { $0.push.event != .start }, "update tokens never get a start")
        harness.advance(by: 5)
        let marker = try #require(harness.produced(on: .state).last?.value)
        #expect(try ActivityState(bytes: marker).dismissedAt != nil, "the marker replaces the snapshot")
        #expect(harness.produced(on: .tokenStore).filter { $0.value == nil }.count == 2)
        #expect(harness.commits[.commands] == 2)
    }

    @Test("an end whose retries run out is dead-lettered for that token before the activity is dropped")
    func endGivenUp() throws {
        var harness = harness(retry: RetryPolicy(maxAttempts: 2, maxElapsed: 60, baseDelay: 1, maxDelay: 1))
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"score": 0}}"#)
        harness.outcome = { send in send.token == self.tokenB && send.push.event == .end ? .retryable(reason: "InternalServerError", after: nil) : .delivered }
        harness.command(1, #"{"activity_id": "match-42", "event": "end", "dismissal_date": \#(dismissal(harness.now.seconds - 1))}"#)
        for _ in 0..<15 { harness.advance(by: 1) }
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.retriesExhausted])
        #expect(letters.first?.token == tokenB)
        #expect(harness.observations.contains { if case .activityExpired(_, "dismissed") = $0 { true } else { false } })
    }

    @Test("a late update after the activity was dismissed is dead-lettered activity-ended, also after a restart")
    func lateCommandAfterDismissal() throws {
        var harness = harness()
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"score": 0}}"#)
        harness.command(1, #"{"activity_id": "match-42", "event": "end", "dismissal_date": \#(dismissal(harness.now.seconds))}"#)
        harness.advance(by: 6)
        #expect(harness.dispatcher.state(of: match) == nil, "the state is dropped")
        harness.command(2, #"{"activity_id": "match-42", "content_state": {"score": 2}}"#)
        harness.advance(by: 1)
        #expect(try harness.deadLetters().map(\.reason) == [.activityEnded])
        #expect(harness.dispatcher.state(of: match) == nil, "no new activity is made")

        // A new owner restores from what was written: the marker keeps the id ended.
        var next = DispatcherHarness(configuration: harness.dispatcher.configuration)
        let states = harness.produced(on: .state).compactMap { produce in produce.value.flatMap { try? ActivityState(bytes: $0) } }
        next.restore(states: [try #require(states.last)])
        next.command(3, #"{"activity_id": "match-42", "content_state": {"score": 3}}"#)
        next.advance(by: 1)
        #expect(try next.deadLetters().map(\.reason) == [.activityEnded])
        #expect(next.dispatcher.state(of: match) == nil)
    }

    @Test("a start after the end begins the id again, with versions going on and the old life's tokens dropped")
    func startAgain() throws {
        var harness = harness()
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"score": 0}}"#)
        harness.command(1, #"{"activity_id": "match-42", "event": "end"}"#)
        harness.advance(by: 1)
        let endVersion = try #require(harness.dispatcher.state(of: match)?.version)
        harness.command(2, #"{"activity_id": "match-42", "event": "start", "content_state": {"score": 5}, "attributes_type": "Match", "attributes": {}, "alert": {"title": "Again", "body": "0-0"}}"#)
        harness.advance(by: 1)
        let state = try #require(harness.dispatcher.state(of: match))
        #expect(state.endedAt == nil)
        #expect(state.version == endVersion + 1)
        #expect(state.contentState == ["score": 5])
        #expect(harness.dispatcher.tokens(of: match).isEmpty, "the ended activity's update tokens are dropped")
        harness.command(3, #"{"activity_id": "match-42", "content_state": {"score": 6}}"#)
        harness.advance(by: 1)
        #expect(try harness.deadLetters().isEmpty)
        #expect(harness.dispatcher.state(of: match)?.contentState == ["score": 6])
    }

    @Test("a late registration after versions went out gets the current state as an update")
    func lateRegistration() throws {
        var harness = DispatcherHarness()
        harness.restore()
        harness.command(0, #"{"activity_id": "match-42", "event": "start", "content_state": {"score": 0}, "attributes_type": "Match", "attributes": {"home": "Owls"}, "alert": {"title": "Kick-off", "body": "0-0"}}"#)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"score": 1}, "stale_date": \#(dismissal(harness.now.seconds - 1))}"#)
        harness.advance(by: 1)
        harness.token(0, #"{"activity_id": "match-42", "token": "\#(tokenA.hex)"}"#)
        let send = try #require(harness.sent.last)
        #expect(send.push.event == .update)
        #expect(send.push.contentState == ["score": 1])
        let request = send.request(bundleID: "com.example", apnsID: "id", now: harness.now)
        #expect(try #require(request.expiration) > harness.now, "a stale push is still kept for an offline device")
    }
}
