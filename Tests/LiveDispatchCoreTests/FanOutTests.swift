import LiveDispatchCore
import Testing

extension FanOut.Action {
    var sent: (token: DeviceToken, version: UInt64)? {
        if case .send(let token, let push) = self { return (token, push.version) }
        return nil
    }
}

@Suite("FanOut")
struct FanOutTests {
    let activity = try! ActivityID("match-42")
    let a = try! DeviceToken(hex: "aa")
    let b = try! DeviceToken(hex: "bb")
    let c = try! DeviceToken(hex: "cc")

    func push(_ version: UInt64, score: Int64) -> LiveActivityPush {
        LiveActivityPush(activityID: activity, version: version, event: .update, contentState: ["score": .integer(score)], timestamp: time(Double(version)))
    }

    func fanOut(maxInFlight: Int = 256, retry: RetryPolicy = RetryPolicy()) -> FanOut {
        var fanOut = FanOut(activityID: activity, configuration: .init(maxInFlight: maxInFlight, retry: retry))
        for token in [a, b, c] { _ = fanOut.addToken(token, sendCurrent: false, now: time(0)) }
        return fanOut
    }

    @Test("a push goes to every token, and completes when every token has it")
    func everyToken() {
        var fanOut = fanOut()
        let actions = fanOut.publish(push(1, score: 1), now: time(0))
        #expect(Set(actions.compactMap { $0.sent?.token }) == [a, b, c])
        #expect(fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0).isEmpty)
        #expect(fanOut.completed(token: b, version: 1, outcome: .delivered, now: time(0), jitter: 0).isEmpty)
        #expect(fanOut.completed(token: c, version: 1, outcome: .delivered, now: time(0), jitter: 0) == [.completed(through: 1)])
        #expect(fanOut.isIdle)
    }

    @Test("restored tokens hold the restored version: nothing is sent until a newer one, then all of them get it")
    func restoredTokens() throws {
        var fanOut = FanOut(activityID: activity, version: 0)
        fanOut.restoreLatest(push(3, score: 3))
        fanOut.restoreTokens([a, b, a, c])
        #expect(fanOut.tokenCount == 3, "a token restored twice is held once")
        #expect(fanOut.isIdle && fanOut.completedThrough == 3)
        #expect(fanOut.publish(push(3, score: 3), now: time(0)).isEmpty, "they already hold version 3")
        let sent = fanOut.publish(push(4, score: 4), now: time(0))
        #expect(Set(sent.compactMap { $0.sent?.token }) == [a, b, c])
        #expect(sent.allSatisfy { $0.sent.map { $0.version == 4 } ?? true })
        var last: [FanOut.Action] = []
        for token in [a, b, c] { last = fanOut.completed(token: token, version: 4, outcome: .delivered, now: time(0), jitter: 0) }
        #expect(last == [.completed(through: 4)])
        // A token registered later than the restore is sent the latest.
        #expect(fanOut.addToken(try DeviceToken(hex: "dd"), sendCurrent: true, now: time(0)).compactMap(\.sent?.version) == [4])
    }

    @Test("semantic 2: tokens not yet sent get the newer state; tokens already sent get it after")
    func supersede() {
        var fanOut = fanOut(maxInFlight: 1)
        let first = fanOut.publish(push(1, score: 1), now: time(0))
        #expect(first.count == 1)
        let firstToken = first[0].sent!.token
        #expect(fanOut.publish(push(2, score: 2), now: time(0)).isEmpty, "the in-flight limit holds")
        var received: [DeviceToken: [UInt64]] = [firstToken: [1]]
        var next = fanOut.completed(token: firstToken, version: 1, outcome: .delivered, now: time(0), jitter: 0)
        var completions: [UInt64] = []
        while let action = next.first {
            next.removeFirst()
            switch action {
            case .send(let token, let push):
                #expect(push.version == 2, "nothing older than the newest is sent")
                #expect(push.version > (received[token]?.last ?? 0))
                received[token, default: []].append(push.version)
                next += fanOut.completed(token: token, version: push.version, outcome: .delivered, now: time(0), jitter: 0)
            case .completed(let through):
                completions.append(through)
            case .wake, .removeToken, .deadLetter:
                Issue.record("unexpected \(action)")
            }
        }
        #expect(received[firstToken] == [1, 2])
        #expect(received.values.filter { $0 == [2] }.count == 2)
        #expect(completions == [1, 2], "version 1 completes once every token has 1 or newer")
    }

    @Test("retryable failures back off and retry with the newest state; exhausted retries dead-letter")
    func retries() {
        var fanOut = FanOut(activityID: activity, configuration: .init(retry: RetryPolicy(maxAttempts: 3, maxElapsed: 100, baseDelay: 1, maxDelay: 10)))
        _ = fanOut.addToken(a, sendCurrent: false, now: time(0))
        _ = fanOut.publish(push(1, score: 1), now: time(0))
        let wait = fanOut.completed(token: a, version: 1, outcome: .retryable(reason: "TooManyRequests", after: nil), now: time(10), jitter: 0.5)
        #expect(wait == [.wake(at: time(10.5))])
        _ = fanOut.publish(push(2, score: 2), now: time(10.1))
        #expect(fanOut.timerFired(now: time(10.2)) == [.wake(at: time(10.5))], "an early wake only re-arms the timer")
        let resend = fanOut.timerFired(now: time(10.5))
        #expect(resend.compactMap(\.sent?.version) == [2])
        let wait2 = fanOut.completed(token: a, version: 2, outcome: .retryable(reason: "InternalServerError", after: 5), now: time(11), jitter: 0.1)
        #expect(wait2 == [.wake(at: time(16))], "retry-after wins over a shorter backoff")
        _ = fanOut.timerFired(now: time(16))
        let again = fanOut.completed(token: a, version: 2, outcome: .retryable(reason: "ServiceUnavailable", after: nil), now: time(17), jitter: 0)
        #expect(again == [.wake(at: time(17))], "version 2 has been sent twice: its budget is its own")
        _ = fanOut.timerFired(now: time(17))
        let gaveUp = fanOut.completed(token: a, version: 2, outcome: .retryable(reason: "ServiceUnavailable", after: nil), now: time(18), jitter: 0)
        #expect(gaveUp == [.deadLetter(a, push(2, score: 2), reason: .retriesExhausted, detail: "ServiceUnavailable", attempts: 3), .completed(through: 2)])
    }

    @Test("retries stop after max_elapsed")
    func maxElapsed() {
        var fanOut = FanOut(activityID: activity, configuration: .init(retry: RetryPolicy(maxAttempts: 100, maxElapsed: 5, baseDelay: 1, maxDelay: 1)))
        _ = fanOut.addToken(a, sendCurrent: false, now: time(0))
        _ = fanOut.publish(push(1, score: 1), now: time(0))
        _ = fanOut.completed(token: a, version: 1, outcome: .retryable(reason: "Shutdown", after: nil), now: time(0), jitter: 1)
        _ = fanOut.timerFired(now: time(1))
        let actions = fanOut.completed(token: a, version: 1, outcome: .retryable(reason: "Shutdown", after: nil), now: time(6), jitter: 1)
        #expect(actions.contains { if case .deadLetter(_, _, .retriesExhausted, _, _) = $0 { true } else { false } })
    }

    @Test("an invalid token is removed; a permanent failure is dead-lettered; both complete")
    func removals() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, score: 1), now: time(0))
        #expect(fanOut.completed(token: a, version: 1, outcome: .tokenInvalid(reason: "Unregistered"), now: time(0), jitter: 0) == [.removeToken(a, reason: "Unregistered")])
        #expect(fanOut.completed(token: b, version: 1, outcome: .permanent(reason: "BadTopic"), now: time(0), jitter: 0)
            == [.deadLetter(b, push(1, score: 1), reason: .apnsRejected, detail: "BadTopic", attempts: 1)])
        #expect(fanOut.completed(token: c, version: 1, outcome: .delivered, now: time(0), jitter: 0) == [.completed(through: 1)])
        #expect(fanOut.tokenCount == 2)
        #expect(fanOut.completed(token: a, version: 1, outcome: .delivered, now: time(0), jitter: 0).isEmpty, "a removed token's late answer is ignored")
    }

    @Test("a token registered mid-activity is sent the current state; a restored one is not")
    func newTokens() {
        var fanOut = fanOut()
        _ = fanOut.publish(push(1, score: 1), now: time(0))
        for token in [a, b, c] { _ = fanOut.completed(token: token, version: 1, outcome: .delivered, now: time(0), jitter: 0) }
        let late = try! DeviceToken(hex: "dd")
        #expect(fanOut.addToken(late, sendCurrent: true, now: time(1)).compactMap(\.sent?.version) == [1])
        #expect(fanOut.addToken(try! DeviceToken(hex: "ee"), sendCurrent: false, now: time(1)).isEmpty)
    }

    @Test("with no tokens, a push completes at once")
    func noTokens() {
        var fanOut = FanOut(activityID: activity)
        #expect(fanOut.publish(push(1, score: 1), now: time(0)) == [.completed(through: 1)])
        #expect(fanOut.publish(push(1, score: 1), now: time(0)).isEmpty, "an old version is ignored")
    }

    /// `count` distinct tokens, 32 bytes each (as a registration carries).
    func tokens(_ count: Int) -> [DeviceToken] {
        (0..<count).map { number in try! DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: number >> (8 * ($0 % 4))) }) }
    }

    /// Completes every send as delivered until nothing more is sent; the
    /// versions each token received, in order.
    func drain(_ fanOut: inout FanOut, _ actions: [FanOut.Action], into received: inout [DeviceToken: [UInt64]]) {
        var pending = actions
        while !pending.isEmpty {
            let action = pending.removeFirst()
            guard let (token, version) = action.sent else { continue }
            received[token, default: []].append(version)
            pending += fanOut.completed(token: token, version: version, outcome: .delivered, now: time(0), jitter: 0)
        }
    }

    /// A fan-out of `count` tokens with version 1 published, and what it sent.
    func published(tokens count: Int, maxInFlight: Int) -> (FanOut, [DeviceToken], [FanOut.Action]) {
        let all = tokens(count)
        var fanOut = FanOut(activityID: activity, configuration: .init(maxInFlight: maxInFlight))
        for token in all { _ = fanOut.addToken(token, sendCurrent: false, now: time(0)) }
        let first = fanOut.publish(push(1, score: 1), now: time(0))
        return (fanOut, all, first)
    }

    @Test("a queued token moved into a removed token's place is sent once")
    func queuedTokenMoves() {
        let (start, all, first) = published(tokens: 5, maxInFlight: 1)
        var fanOut = start
        #expect(first.compactMap(\.sent?.token) == [all[0]])
        // The last token, waiting, moves into the place of the one in flight,
        // which no queue entry names.
        let afterRemoval = fanOut.removeToken(all[0])
        #expect(afterRemoval.compactMap(\.sent?.token) == [all[1]])
        var received: [DeviceToken: [UInt64]] = [:]
        drain(&fanOut, first + afterRemoval, into: &received)
        #expect(received == [all[0]: [1], all[1]: [1], all[2]: [1], all[3]: [1], all[4]: [1]])
        #expect(fanOut.completedThrough == 1)
        #expect(fanOut.isIdle)
    }

    @Test("a queue entry left by a removal does not send the token now in that place twice")
    func staleEntrySkipped() {
        let (start, all, first) = published(tokens: 4, maxInFlight: 2)
        var fanOut = start
        #expect(first.compactMap(\.sent?.token) == [all[0], all[1]])
        // The third and fourth wait; the fourth moves into the third's place.
        #expect(fanOut.removeToken(all[2]).isEmpty)
        // A new token takes the fourth's old place, which a queue entry still names.
        let late = tokens(5)[4]
        #expect(fanOut.addToken(late, sendCurrent: true, now: time(0)).isEmpty, "the in-flight limit holds")
        var received: [DeviceToken: [UInt64]] = [:]
        drain(&fanOut, first, into: &received)
        #expect(received == [all[0]: [1], all[1]: [1], all[3]: [1], late: [1]])
        #expect(fanOut.completedThrough == 1)
        #expect(fanOut.isIdle)
    }

    @Test("randomized: with removals moving tokens in the table, each token has one send in flight and ends with the newest version",
          arguments: [11, 12, 13, 14] as [UInt64])
    func randomizedRemovals(seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        let pool = tokens(40)
        var fanOut = FanOut(activityID: activity, configuration: .init(maxInFlight: 4, retry: RetryPolicy(maxAttempts: 1_000, maxElapsed: 1_000_000, baseDelay: 0, maxDelay: 0)))
        var present: Set<DeviceToken> = []
        var inFlight: [DeviceToken: UInt64] = [:]
        var newest: [DeviceToken: UInt64] = [:]
        var version: UInt64 = 0
        var clock = 0.0
        func apply(_ actions: [FanOut.Action]) {
            for action in actions {
                switch action {
                case .send(let token, let push):
                    #expect(present.contains(token), "only a registered token is sent to")
                    #expect(inFlight[token] == nil, "one send in flight per token")
                    #expect(push.version > newest[token] ?? 0, "never an older version after a newer one")
                    inFlight[token] = push.version
                case .removeToken(let token, _):
                    present.remove(token)
                    newest.removeValue(forKey: token)
                case .wake, .completed, .deadLetter:
                    break
                }
            }
        }
        for _ in 0..<3_000 {
            clock += 0.001
            let token = pool[Int.random(in: 0..<pool.count, using: &generator)]
            switch Int.random(in: 0..<10, using: &generator) {
            case 0, 1:
                present.insert(token)
                apply(fanOut.addToken(token, sendCurrent: Bool.random(using: &generator), now: time(clock)))
            case 2:
                // A removed token's send is ignored when it completes; one
                // registered again starts afresh.
                present.remove(token)
                inFlight.removeValue(forKey: token)
                newest.removeValue(forKey: token)
                apply(fanOut.removeToken(token))
            case 3:
                version += 1
                apply(fanOut.publish(push(version, score: Int64(version)), now: time(clock)))
            case 4:
                apply(fanOut.timerFired(now: time(clock)))
            default:
                guard let sentTo = inFlight.keys.sorted().randomElement(using: &generator), let sentVersion = inFlight.removeValue(forKey: sentTo)
                else { continue }
                let outcome: FanOut.Outcome = switch Int.random(in: 0..<10, using: &generator) {
                case 0: .retryable(reason: "TooManyRequests", after: nil)
                case 1: .tokenInvalid(reason: "Unregistered")
                default: .delivered
                }
                if outcome == .delivered { newest[sentTo] = sentVersion }
                apply(fanOut.completed(token: sentTo, version: sentVersion, outcome: outcome, now: time(clock), jitter: 0))
            }
            #expect(fanOut.tokenCount == present.count)
        }
        // Deliver everything still owed.
        version += 1
        apply(fanOut.publish(push(version, score: Int64(version)), now: time(clock)))
        for _ in 0..<1_000 where !inFlight.isEmpty || !fanOut.isIdle {
            clock += 1
            apply(fanOut.timerFired(now: time(clock)))
            for sentTo in inFlight.keys.sorted() {
                guard let sentVersion = inFlight.removeValue(forKey: sentTo) else { continue }
                newest[sentTo] = sentVersion
                apply(fanOut.completed(token: sentTo, version: sentVersion, outcome: .delivered, now: time(clock), jitter: 0))
            }
        }
        #expect(inFlight.isEmpty && fanOut.isIdle, "nothing is left waiting")
        for token in present { #expect(newest[token] == version, "every registered token ends with the newest version") }
        #expect(fanOut.completedThrough == version)
    }

    @Test("full-jitter backoff stays within its ceiling")
    func backoff() {
        let policy = RetryPolicy(maxAttempts: 10, maxElapsed: 100, baseDelay: 0.5, maxDelay: 4)
        #expect(policy.delay(attempt: 1, jitter: 1) == 0.5)
        #expect(policy.delay(attempt: 3, jitter: 1) == 2)
        #expect(policy.delay(attempt: 9, jitter: 1) == 4)
        #expect(policy.delay(attempt: 9, jitter: 0.25) == 1)
        #expect(policy.delay(attempt: 2, jitter: 0) == 0)
    }
}

@Suite("OffsetTracker")
struct OffsetTrackerTests {
    let partition = OffsetTracker.Partition(topic: "livedispatch.commands", number: 3)

    @Test("offsets completed out of order commit only up to the first unfinished one")
    func outOfOrder() throws {
        var tracker = OffsetTracker()
        tracker.assign(partition)
        for offset in [10, 11, 12, 15, 16] as [Int64] { try tracker.read(partition, offset: offset) }
        #expect(tracker.outstanding == 5)
        #expect(try tracker.complete(partition, offset: 12) == nil)
        #expect(try tracker.complete(partition, offset: 11) == nil)
        #expect(try tracker.complete(partition, offset: 10) == OffsetTracker.Commit(partition: partition, offset: 15))
        #expect(tracker.outstanding == 2)
        #expect(try tracker.complete(partition, offset: 16) == nil)
        #expect(try tracker.complete(partition, offset: 15) == OffsetTracker.Commit(partition: partition, offset: 17))
        #expect(tracker.outstanding == 0)
        #expect(tracker.committable(partition) == 17)
    }

    @Test("misuse is reported, not trapped")
    func misuse() throws {
        var tracker = OffsetTracker()
        try tracker.read(partition, offset: 5)
        #expect(throws: OffsetTracker.Misuse.self) { try tracker.read(partition, offset: 5) }
        #expect(throws: OffsetTracker.Misuse.self) { try tracker.complete(partition, offset: 4) }
        try tracker.read(partition, offset: 8)
        #expect(throws: OffsetTracker.Misuse.self, "a gap was never read") { try tracker.complete(partition, offset: 6) }
        try tracker.complete(partition, offset: 8)
        #expect(throws: OffsetTracker.Misuse.self) { try tracker.complete(partition, offset: 8) }
        #expect(throws: OffsetTracker.Misuse.self) {
            try tracker.complete(OffsetTracker.Partition(topic: "other", number: 0), offset: 1)
        }
    }

    @Test("revocation forgets a partition's backlog")
    func revoke() throws {
        var tracker = OffsetTracker()
        let other = OffsetTracker.Partition(topic: "livedispatch.commands", number: 4)
        try tracker.read(partition, offset: 1)
        try tracker.read(other, offset: 1)
        tracker.revoke(partition)
        #expect(tracker.outstanding == 1)
        #expect(tracker.assignedPartitions == [other])
    }

    @Test("randomized: the commit position is always the first unfinished offset")
    func randomized() throws {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<200 {
            var tracker = OffsetTracker()
            var offsets: [Int64] = []
            var next: Int64 = 0
            for _ in 0..<Int.random(in: 1...60, using: &generator) {
                next += Int64.random(in: 1...3, using: &generator)
                offsets.append(next)
                try tracker.read(partition, offset: next)
            }
            var remaining = Set(offsets)
            for offset in offsets.shuffled(using: &generator) {
                try tracker.complete(partition, offset: offset)
                remaining.remove(offset)
                let expected = remaining.min() ?? (offsets.last! + 1)
                #expect(tracker.committable(partition) == expected)
                #expect(tracker.outstanding >= remaining.count)
            }
            #expect(tracker.outstanding == 0)
        }
    }
}
