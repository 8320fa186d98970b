import Testing

@testable import LiveDispatchCore

/// The activity deliveries machine, called directly: registrations, the
/// fan-out of each flush, what a push waits for and what it completes with.
@Suite("activity deliveries")
struct ActivityDeliveriesTests {
    let activity = try! ActivityID("match-3")
    let first = try! DeviceToken(hex: String(repeating: "01", count: 32))
    let second = try! DeviceToken(hex: String(repeating: "02", count: 32))

    func flush(version: UInt64, event: ActivityEvent = .update, contentState: JSONValue = ["score": .integer(1)], offsets: [Int64]) -> Coalescer.Flush {
        let push = LiveActivityPush(activityID: activity, version: version, event: event, contentState: contentState, timestamp: time(Double(version)))
        return Coalescer.Flush(
            push: push, snapshot: ActivityState(activityID: activity, contentState: contentState, version: version, createdAt: time(0)), offsets: offsets)
    }

    /// Deliveries with `tokens` registered to the activity (sandbox for the second).
    func machine() -> ActivityDeliveries {
        var deliveries = ActivityDeliveries(configuration: .init())
        _ = deliveries.register(TokenRegistration(activityID: activity, token: first), state: nil, now: time(0))
        _ = deliveries.register(TokenRegistration(activityID: activity, token: second, environment: .sandbox, app: "scores"), state: nil, now: time(0))
        return deliveries
    }

    /// Starts every send the fan-out has ready, as the partition's budget would.
    func sends(_ deliveries: inout ActivityDeliveries) -> [PartitionDispatcher.Send] {
        let ready = deliveries.withFanOut(activity) { (fanOut: inout FanOut) -> [FanOut.Action] in
            fanOut.allowance = .max
            defer { fanOut.allowance = 0 }
            return fanOut.resume(now: time(1))
        } ?? []
        return ready.compactMap { action -> PartitionDispatcher.Send? in
            guard case .send(let token, let push) = action, case .send(let send) = deliveries.plan(activity, token, push) else { return nil }
            return send
        }
    }

    /// Settles `send` with `outcome` as the partition does.
    func settle(
        _ send: PartitionDispatcher.Send, _ outcome: FanOut.Outcome, _ deliveries: inout ActivityDeliveries, writes: inout PartitionWrites
    ) -> (FanOut.Settlement?, [PartitionDispatcher.Action]) {
        guard let (settlement, _) = deliveries.withFanOut(activity, {
            $0.settle(token: send.token, version: send.push.version, outcome: outcome, now: time(2), jitter: 0)
        }) else { return (nil, []) }
        return (settlement, deliveries.settled(send, settlement, now: time(2), writes: &writes))
    }

    @Test("a flush goes to every token with one shared payload, where each token's registration says")
    func publishes() {
        var deliveries = machine()
        var writes = PartitionWrites(partition: 1)
        let (actions, fanOut) = deliveries.publish(flush(version: 1, offsets: [0]), version: 1, now: time(1), writes: &writes)
        #expect(actions.isEmpty)
        #expect(fanOut == [], "sends wait for the partition's budget")
        let sent = sends(&deliveries)
        #expect(Set(sent.map(\.token)) == [first, second])
        #expect(sent.first { $0.token == second }?.environment == .sandbox)
        #expect(sent.first { $0.token == second }?.app == "scores")
        #expect(sent[0].payload == sent[1].payload)
        let completion = deliveries.complete(activity, now: time(1))
        #expect(completion == nil, "nothing is complete while sends are in flight")
    }

    @Test("a completed push is counted, written with the activity's history, and carries every offset folded into it")
    func completes() throws {
        var deliveries = machine()
        var writes = PartitionWrites(partition: 1)
        _ = deliveries.publish(flush(version: 1, offsets: [4, 5]), version: 1, now: time(1), writes: &writes)
        let sent = sends(&deliveries)
        let (delivered, _) = settle(sent[0], .delivered, &deliveries, writes: &writes)
        #expect(delivered == .delivered)
        let (failed, records) = settle(sent[1], .permanent(reason: "400 BadTopic"), &deliveries, writes: &writes)
        #expect(failed == .failed(reason: "400 BadTopic"))
        #expect(records.isEmpty, "the failure's record is written with its dead letter")

        let completed = deliveries.complete(activity, now: time(3))
        let completion = try #require(completed)
        #expect(completion.offsets == [4, 5])
        #expect(completion.newest.push.version == 1)
        #expect(completion.tokens == 2 && completion.sample == [first, second])
        let summary = try #require(completion.history.last)
        #expect(summary.delivered == 1 && summary.failed == ["400 BadTopic": 1] && summary.commands == 2)
        #expect(deliveries.pushes(of: activity) == completion.history)
        let again = deliveries.complete(activity, now: time(3))
        #expect(again == nil, "a push completes once")
    }

    @Test("a dead letter records the token's failure; the push waits for both writes; the next delivery clears the record")
    func recordsFailures() throws {
        var deliveries = machine()
        var writes = PartitionWrites(partition: 1)
        let failure = PartitionDispatcher.SendFailure(
            token: first, push: flush(version: 1, offsets: [0]).push, reason: .retriesExhausted, detail: "503 ServiceUnavailable", attempts: 6)
        let actions = deliveries.deadLetter(activity, failure, channel: nil, now: time(2), writes: &writes)
        let produced = actions.compactMap { if case .produce(let produce) = $0 { produce } else { nil } }
        #expect(produced.map(\.topic) == [.deadLetters, .tokenStore])
        let record = try TokenRegistration(bytes: try #require(produced[1].value))
        #expect(record.lastOutcome?.result == .failed && record.lastOutcome?.reason == "503 ServiceUnavailable")
        let letter = actions.compactMap { if case .observe(.deadLettered(let letter)) = $0 { letter } else { nil } }.first
        #expect(letter?.details["attempts"] == .integer(6) && letter?.token == first)

        // Registering again keeps the failure the record names.
        let (stored, _) = deliveries.register(TokenRegistration(activityID: activity, token: first), state: nil, now: time(3))
        #expect(stored.lastOutcome?.result == .failed)

        _ = deliveries.publish(flush(version: 1, offsets: [0]), version: 1, now: time(4), writes: &writes)
        deliveries.writeAcknowledged(activity)
        let sent = sends(&deliveries)
        let toFirst = try #require(sent.first { $0.token == first })
        let (_, cleared) = settle(toFirst, .delivered, &deliveries, writes: &writes)
        let clearing = cleared.compactMap { if case .produce(let produce) = $0 { produce } else { nil } }
        #expect(try clearing.map { try TokenRegistration(bytes: $0.value ?? []).lastOutcome?.result } == [.delivered])
    }

    @Test("a payload over APNs' limit is dead-lettered, never sent, and its version completes in turn")
    func payloadTooLarge() throws {
        var deliveries = machine()
        var writes = PartitionWrites(partition: 1)
        let huge = flush(version: 1, contentState: ["text": .string(String(repeating: "x", count: 5000))], offsets: [9])
        let (actions, fanOut) = deliveries.publish(huge, version: 1, now: time(1), writes: &writes)
        #expect(fanOut == nil)
        #expect(actions.contains { if case .observe(.deadLettered(let letter)) = $0 { letter.reason == .payloadTooLarge } else { false } })
        let waiting = deliveries.complete(activity, now: time(1))
        #expect(waiting == nil, "it waits for its dead letter")
        deliveries.writeAcknowledged(activity)
        let completed = deliveries.complete(activity, now: time(2))
        #expect(completed?.offsets == [9])
    }

    @Test("tokens past their expiry, or orphaned past max_age, are found; an activity left with neither tokens nor state is dropped")
    func expiry() {
        var deliveries = ActivityDeliveries(configuration: .init(coalescer: .init(maxAge: 100)))
        _ = deliveries.register(TokenRegistration(activityID: activity, token: first, expiresAt: time(50)), state: nil, now: time(0))
        _ = deliveries.register(TokenRegistration(activityID: activity, token: second), state: nil, now: time(0))
        #expect(deliveries.expiredTokens(now: time(49), hasState: { _ in false }).isEmpty)
        #expect(deliveries.expiredTokens(now: time(50), hasState: { _ in true }).map(\.tokens) == [[first]])
        #expect(deliveries.expiredTokens(now: time(100), hasState: { _ in false }).map(\.tokens) == [[first, second]])
        #expect(deliveries.expiredTokens(now: time(100), hasState: { _ in true }).map(\.tokens) == [[first]], "a token of a live activity is not orphaned")

        _ = deliveries.unregister(activity, first)
        _ = deliveries.unregister(activity, second)
        #expect(deliveries.tokens(of: activity).isEmpty)
        let kept = deliveries.withFanOut(activity) { _ in true }
        #expect(kept == true, "its fan-out outlives its tokens while it may have state")
        deliveries.dropIfAbandoned(activity, hasState: false)
        let dropped = deliveries.withFanOut(activity) { _ in true }
        #expect(dropped == nil)
    }
}
