import Testing

@testable import LiveDispatchCore

/// The audience start machine, called directly: admission, ledgers before
/// sends, and when an audience start is done.
@Suite("audience starts")
struct AudienceStartsTests {
    let audience = try! AudienceKey("followers:owls")
    let activity = try! ActivityID("match-7")
    let first = try! DeviceToken(hex: "a1")
    let second = try! DeviceToken(hex: "b2")
    let otherType = try! DeviceToken(hex: "c3")
    let otherApp = try! DeviceToken(hex: "d4")

    func registration(_ token: DeviceToken, type: String = "MatchAttributes", app: String? = nil, expiresAt: UnixTime? = nil) -> PushToStartRegistration {
        PushToStartRegistration(audience: audience, attributesType: type, token: token, expiresAt: expiresAt, app: app)
    }

    var start: AudienceStart {
        AudienceStart(
            audience: audience,
            push: LiveActivityPush(
                activityID: activity, version: 1, event: .start, contentState: ["score": .integer(0)], timestamp: time(0),
                attributesType: "MatchAttributes", attributes: ["home": .string("Owls")]),
            app: "scores")
    }

    /// Starts with the four tokens registered.
    func machine(maxStartsPerHour: Int = 10) -> AudienceStarts {
        var starts = AudienceStarts(budget: .init(maxStartsPerHour: maxStartsPerHour))
        for registration in [
            registration(first, app: "scores"), registration(second, app: "scores"), registration(otherType, type: "OtherAttributes", app: "scores"),
            registration(otherApp, app: "news"),
        ] {
            let stored = starts.apply(registration, now: time(0))
            #expect(stored.value != nil && stored.replaced.isEmpty)
        }
        return starts
    }

    func fanOut() -> FanOut { .sharingBudget(activity, version: 0, configuration: .init()) }

    @Test("only tokens of the start's attributes type and app are admitted, each ledger written before anything is sent")
    func admission() {
        var starts = machine()
        var writes = PartitionWrites(partition: 3)
        let actions = starts.begin(start, offset: 40, fanOut: fanOut(), now: time(1), writes: &writes)
        let produced = actions.compactMap { if case .produce(let produce) = $0 { produce } else { nil } }
        #expect(produced.map(\.key) == [PushToStartRegistration.storeKey(audience, first), PushToStartRegistration.storeKey(audience, second)])
        #expect(produced.allSatisfy { $0.topic == .tokenStore && $0.partition == 3 })
        #expect(produced.allSatisfy { $0.value.map { String(decoding: $0, as: UTF8.self).contains("\"started\"") } == true })
        #expect(!actions.contains { if case .send = $0 { true } else { false } }, "nothing is sent before its ledger is stored")
        let unfinished = starts.finish(40)
        #expect(unfinished == nil, "ledgers are still being written")

        let effect = writes.acknowledged(produced[0].ticket)
        #expect(effect == .startRecorded(40, first))
    }

    @Test("a stored ledger releases that token's start; the audience start is done when every start is settled")
    func sendsAfterLedger() throws {
        var starts = machine()
        var writes = PartitionWrites(partition: 0)
        _ = starts.begin(start, offset: 40, fanOut: fanOut(), now: time(1), writes: &writes)
        var sends: [PartitionDispatcher.Send] = []
        for token in [first, second] {
            let recorded = starts.recorded(40, token, now: time(2))
            let fanOutActions = try #require(recorded)
            #expect(fanOutActions.isEmpty, "the fan-out waits for the partition's budget")
            let resumed = starts.withFanOut(40) { (fanOut: inout FanOut) -> [FanOut.Action] in
                fanOut.allowance = 1
                defer { fanOut.allowance = 0 }
                return fanOut.resume(now: time(2))
            } ?? []
            for case .send(let sentTo, let push) in resumed {
                guard case .send(let send)? = starts.plan(40, sentTo, push, defaultEnvironment: .production) else {
                    Issue.record("the start is sent")
                    continue
                }
                sends.append(send)
            }
        }
        #expect(sends.map(\.token) == [first, second])
        #expect(sends.allSatisfy { $0.audienceStart == 40 && $0.app == "scores" && $0.push.event == .start })
        #expect(sends[0].payload == sends[1].payload, "one payload for every token")

        for send in sends {
            let settled = starts.withFanOut(40) {
                $0.settle(token: send.token, version: send.push.version, outcome: .delivered, now: time(3), jitter: 0)
            }
            starts.settled(40, send.token, try #require(settled?.settlement))
        }
        let finished = starts.finish(40)
        #expect(finished == .audienceStarted(activity, audience: audience, delivered: [first, second], alreadyStarted: 0))
        #expect(starts.isIdle)
        let again = starts.finish(40)
        #expect(again == nil, "an audience start finishes once")
    }

    @Test("a token already started with the activity is skipped; one over its hourly budget is dead-lettered")
    func budget() throws {
        var starts = machine(maxStartsPerHour: 1)
        var writes = PartitionWrites(partition: 0)
        _ = starts.begin(start, offset: 1, fanOut: fanOut(), now: time(1), writes: &writes)
        let again = starts.begin(start, offset: 2, fanOut: fanOut(), now: time(2), writes: &writes)
        #expect(again.isEmpty, "the same activity is not started twice on a token")

        var other = start
        other.push = LiveActivityPush(
            activityID: try ActivityID("match-8"), version: 1, event: .start, contentState: [:], timestamp: time(0), attributesType: "MatchAttributes")
        let limited = starts.begin(other, offset: 3, fanOut: fanOut(), now: time(3), writes: &writes)
        let letters = limited.compactMap { if case .observe(.deadLettered(let letter)) = $0 { letter } else { nil } }
        #expect(letters.map(\.reason) == [.startRateLimited, .startRateLimited])
        #expect(letters.compactMap(\.token) == [first, second])
        let waiting = starts.finish(3)
        #expect(waiting == nil, "it waits for its dead letters")
        starts.writeAcknowledged(3)
        starts.writeAcknowledged(3)
        let finished = starts.finish(3)
        #expect(finished == .audienceStarted(other.push.activityID, audience: audience, delivered: [], alreadyStarted: 0))
    }

    @Test("a device's new token replaces its old one of the same app and type in the audience, also when both are restored")
    func deviceReplacesItsToken() throws {
        func named(_ token: DeviceToken, device: String?, type: String = "MatchAttributes", app: String? = "scores", at seconds: Double = 0) -> PushToStartRegistration {
            var registration = registration(token, type: type, app: app)
            registration.device = device
            registration.registeredAt = time(seconds)
            return registration
        }
        var starts = AudienceStarts(budget: .init())
        #expect(starts.apply(named(first, device: "phone-1"), now: time(0)).replaced.isEmpty)
        #expect(starts.apply(named(otherType, device: "phone-1", type: "OtherAttributes"), now: time(0)).replaced.isEmpty)
        #expect(starts.apply(named(otherApp, device: "phone-1", app: "news"), now: time(0)).replaced.isEmpty)
        #expect(starts.apply(named(second, device: nil), now: time(0)).replaced.isEmpty, "a token without a device replaces none")
        let renewed = try DeviceToken(hex: "e5")
        let applied = starts.apply(named(renewed, device: "phone-1", at: 5), now: time(5))
        #expect(applied.replaced == [first])
        #expect(starts.tokens(of: audience) == [second, otherType, otherApp, renewed].sorted())
        #expect(applied.value.map { String(decoding: $0, as: UTF8.self).contains(#""device":"phone-1""#) } == true)

        // Read back from token-store with the old record still there (its
        // tombstone not yet written): the newer registration wins, in
        // either order.
        let (old, new) = (try DeviceToken(hex: String(repeating: "a1", count: 32)), try DeviceToken(hex: String(repeating: "e5", count: 32)))
        for order in [[old, new], [new, old]] {
            var restored = AudienceStarts(budget: .init())
            for token in order {
                let registration = named(token, device: "phone-1", at: token == new ? 5 : 0)
                restored.restore(key: registration.storeKey, value: registration.json.serialized(), apps: .unchecked)
            }
            #expect(restored.tokens(of: audience) == [new], "\(order)")
        }
    }

    @Test("the dispatcher writes the replaced token's tombstone before the registration that completes its offset")
    func replacementWrites() throws {
        var dispatcher = PartitionDispatcher(partition: 2, configuration: .init())
        var registration = registration(first, app: nil)
        registration.device = "phone-1"
        _ = dispatcher.pushToStartRecord(registration, offset: 10, now: time(0))
        registration.token = try DeviceToken(hex: "e5")
        let actions = dispatcher.pushToStartRecord(registration, offset: 11, now: time(1))
        let produced = actions.compactMap { if case .produce(let produce) = $0 { produce } else { nil } }
        #expect(produced.map(\.key) == [PushToStartRegistration.storeKey(audience, first), registration.storeKey])
        #expect(produced.map { $0.value == nil } == [true, false])
        #expect(dispatcher.pushToStartTokens(of: audience) == [registration.token])
    }

    @Test("a token APNs reports gone is forgotten and tombstoned; expired tokens are swept")
    func removalAndSweep() {
        var starts = machine()
        var writes = PartitionWrites(partition: 0)
        _ = starts.begin(start, offset: 5, fanOut: fanOut(), now: time(1), writes: &writes)
        let removed = starts.removeToken(5, first, reason: "Unregistered", writes: &writes)
        #expect(removed.first == .observe(.tokenRemoved(activity, first, reason: "Unregistered")))
        #expect(starts.tokens(of: audience) == [second, otherType, otherApp].sorted())

        var expiring = AudienceStarts(budget: .init())
        _ = expiring.apply(registration(first, expiresAt: time(10)), now: time(0))
        _ = expiring.apply(registration(second), now: time(0))
        #expect(expiring.sweep(now: time(9)).isEmpty)
        let swept = expiring.sweep(now: time(10))
        #expect(swept == [PushToStartRegistration.storeKey(audience, first)])
        #expect(expiring.tokens(of: audience) == [second])
        let expired = expiring.apply(registration(second, expiresAt: time(5)), now: time(6))
        #expect(expired.value == nil, "an expired registration is a removal")
        #expect(expiring.tokens(of: audience).isEmpty)
    }
}
