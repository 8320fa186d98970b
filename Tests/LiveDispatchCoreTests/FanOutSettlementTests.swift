import Testing

@testable import LiveDispatchCore

/// What a fan-out says became of each send: the one value its owner counts
/// and records, with whether it gave up on the token.
@Suite("FanOut settlements")
struct FanOutSettlementTests {
    let activity = try! ActivityID("match-5")
    let token = try! DeviceToken(hex: "ab")

    func push(_ version: UInt64) -> LiveActivityPush {
        LiveActivityPush(activityID: activity, version: version, event: .update, contentState: [:], timestamp: time(Double(version)))
    }

    /// A fan-out with one token, version 1 in flight to it.
    func inFlight(retry: RetryPolicy = RetryPolicy()) -> FanOut {
        var fanOut = FanOut(activityID: activity, configuration: .init(retry: retry))
        _ = fanOut.addToken(token, sendCurrent: false, now: time(0))
        _ = fanOut.publish(push(1), now: time(0))
        return fanOut
    }

    @Test("delivered, token gone and refused settle as they say; the token gone is also removed")
    func atTheirWord() {
        var delivered = inFlight()
        let settled = delivered.settle(token: token, version: 1, outcome: .delivered, now: time(1), jitter: 0)
        #expect(settled.settlement == .delivered)

        var gone = inFlight()
        let (settlement, actions) = gone.settle(token: token, version: 1, outcome: .tokenInvalid(reason: "Unregistered"), now: time(1), jitter: 0)
        #expect(settlement == .failed(reason: "Unregistered"))
        #expect(actions.contains(.removeToken(token, reason: "Unregistered")))

        var refused = inFlight()
        let refusal = refused.settle(token: token, version: 1, outcome: .permanent(reason: "400 BadTopic"), now: time(1), jitter: 0)
        #expect(refusal.settlement == .failed(reason: "400 BadTopic"))
    }

    @Test("a retryable failure is undecided until the retries run out, then failed, with its dead letter")
    func retriesThenFails() {
        var fanOut = inFlight(retry: RetryPolicy(maxAttempts: 2, maxElapsed: 60, baseDelay: 1, maxDelay: 1))
        let first = fanOut.settle(token: token, version: 1, outcome: .retryable(reason: "503", after: nil), now: time(1), jitter: 0.5)
        #expect(first.settlement == .undecided)
        #expect(!first.actions.contains { if case .deadLetter = $0 { true } else { false } })
        let retried = fanOut.timerFired(now: time(10))
        #expect(retried.contains { if case .send = $0 { true } else { false } })
        let last = fanOut.settle(token: token, version: 1, outcome: .retryable(reason: "503", after: nil), now: time(11), jitter: 0.5)
        #expect(last.settlement == .failed(reason: "503"))
        #expect(last.actions.contains { if case .deadLetter(_, _, .retriesExhausted, "503", 2) = $0 { true } else { false } })
    }

    @Test("a send the fan-out no longer waits for is settled as its outcome says, never retried")
    func unknownSend() {
        var fanOut = inFlight()
        _ = fanOut.removeToken(token)
        let retryable = fanOut.settle(token: token, version: 1, outcome: .retryable(reason: "503", after: nil), now: time(1), jitter: 0)
        #expect(retryable.settlement == .undecided && retryable.actions.isEmpty)
        let delivered = fanOut.settle(token: token, version: 1, outcome: .delivered, now: time(1), jitter: 0)
        #expect(delivered.settlement == .delivered)
        #expect(fanOut.isIdle)
    }
}
