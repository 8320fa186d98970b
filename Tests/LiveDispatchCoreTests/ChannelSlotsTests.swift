import Testing

@testable import LiveDispatchCore

/// The broadcast channel machine, called directly.
@Suite("broadcast channel slots")
struct ChannelSlotsTests {
    let activity = try! ActivityID("final-1")

    func flush(version: UInt64, event: ActivityEvent = .update, offsets: [Int64]) -> Coalescer.Flush {
        let push = LiveActivityPush(
            activityID: activity, version: version, event: event, contentState: ["score": .integer(Int64(version))], timestamp: time(Double(version)))
        return Coalescer.Flush(push: push, snapshot: ActivityState(activityID: activity, version: version, createdAt: time(0)), offsets: offsets)
    }

    func creating() -> ChannelSlots {
        var slots = ChannelSlots()
        _ = slots.begin(activity, environment: .sandbox, storagePolicy: .defaultForActivities, app: "scores")
        return slots
    }

    @Test("a channel is asked for once; what is published meanwhile is held, merged, and handed back with the channel")
    func createdOnce() throws {
        var slots = ChannelSlots()
        let request = slots.begin(activity, environment: .sandbox, storagePolicy: .defaultForActivities, app: "scores")
        #expect(request == .create(activity, environment: .sandbox, storagePolicy: .defaultForActivities, app: "scores"))
        let second = slots.begin(activity, environment: .production, storagePolicy: .defaultForActivities, app: nil)
        #expect(second == nil)
        #expect(slots.isCreating(activity) && slots.isCreatingAny)
        let held = [slots.hold(flush(version: 1, event: .start, offsets: [0])), slots.hold(flush(version: 2, offsets: [1]))]
        #expect(held == [true, true])

        guard case .ready(let channel, let creation) = slots.created(activity, id: "ch-1", now: time(5)) else {
            Issue.record("the channel is ready")
            return
        }
        #expect(channel.id == "ch-1" && channel.environment == .sandbox && channel.app == "scores" && channel.createdAt == time(5))
        #expect(creation.held?.push.version == 2 && creation.held?.push.event == .start)
        #expect(creation.held?.offsets == [0, 1])
        #expect(slots.channel(of: activity) == channel)
        #expect(!slots.isCreatingAny)
        let heldAfter = slots.hold(flush(version: 3, offsets: [2]))
        #expect(!heldAfter, "nothing is held once the channel exists")
        #expect(slots.readyActivities == [activity])
    }

    @Test("audience starts wait for the channel, then carry its id")
    func audiencesWait() throws {
        var slots = creating()
        let audience = try AudienceKey("followers:owls")
        let start = flush(version: 1, event: .start, offsets: [0]).push
        let waiting = slots.holdAudiences(.init(keys: [audience], push: start, app: nil))
        #expect(waiting == nil)
        guard case .ready(_, let creation) = slots.created(activity, id: "ch-2", now: time(1)) else {
            Issue.record("the channel is ready")
            return
        }
        #expect(creation.audiences?.keys == [audience])
        let later = slots.holdAudiences(.init(keys: [audience], push: start, app: nil))
        #expect(later?.inputPushChannel == "ch-2")
    }

    @Test("a failed create is retried with backoff while retryable and within the policy, then given up")
    func retriesThenGivesUp() {
        var slots = creating()
        let retry = RetryPolicy(maxAttempts: 3, maxElapsed: 60, baseDelay: 1, maxDelay: 10)
        guard case .retry(let at) = slots.createFailed(activity, retryable: true, retry: retry, now: time(10), jitter: 0.999) else {
            Issue.record("the first failure is retried")
            return
        }
        #expect(at > time(10) && at <= time(20))
        let retried = slots.retryTimer(for: activity)
        #expect(retried == .create(activity, environment: .sandbox, storagePolicy: .defaultForActivities, app: "scores"))
        guard case .retry = slots.createFailed(activity, retryable: true, retry: retry, now: time(12), jitter: 0) else {
            Issue.record("the second failure is retried")
            return
        }
        _ = slots.retryTimer(for: activity)
        guard case .gaveUp(let creation) = slots.createFailed(activity, retryable: true, retry: retry, now: time(14), jitter: 0) else {
            Issue.record("the third attempt is the last")
            return
        }
        #expect(creation.attempts == 3)
        #expect(!slots.isCreating(activity) && slots.channel(of: activity) == nil)

        var refused = creating()
        guard case .gaveUp = refused.createFailed(activity, retryable: false, retry: retry, now: time(0), jitter: 0) else {
            Issue.record("a refusal is not retried")
            return
        }
    }

    @Test("an activity that expires while its channel is created gives up its held pushes, and the channel is deleted once named")
    func expiresWhileCreating() {
        var slots = creating()
        _ = slots.hold(flush(version: 1, event: .start, offsets: [3, 4]))
        let expired = slots.expired(activity)
        #expect(expired.delete == nil && expired.heldOffsets == [3, 4])
        let retried = slots.retryTimer(for: activity)
        #expect(retried == nil, "an abandoned channel is not asked for again")
        guard case .ignored = slots.created(activity, id: "ch-0", now: time(9)) else {
            Issue.record("nothing waits once the retry found the activity gone")
            return
        }
        var named = creating()
        _ = named.expired(activity)
        guard case .delete(let channel) = named.created(activity, id: "ch-late", now: time(9)) else {
            Issue.record("an abandoned channel is deleted")
            return
        }
        #expect(channel.id == "ch-late" && channel.environment == .sandbox)
        #expect(named.channel(of: activity) == nil)

        var ready = ChannelSlots()
        let channel2 = ActivityChannel(id: "ch-3", environment: .production, storagePolicy: .defaultForActivities, createdAt: time(0))
        ready.restore(activity, channel2)
        let left = ready.expired(activity)
        #expect(left.delete == channel2)
        #expect(ready.channel(of: activity) == nil)
    }

    @Test("updates go to the channel as one broadcast; a start is not broadcast; without a channel the send is refused")
    func broadcastPlan() {
        var slots = ChannelSlots()
        guard case .settle(.permanent) = slots.broadcast(flush(version: 1, offsets: []).push, activity: activity) else {
            Issue.record("no channel, no broadcast")
            return
        }
        let channel = ActivityChannel(id: "ch-4", environment: .production, storagePolicy: .defaultForActivities, createdAt: time(0), app: "scores")
        slots.restore(activity, channel)
        guard case .settle(.delivered) = slots.broadcast(flush(version: 1, event: .start, offsets: []).push, activity: activity) else {
            Issue.record("a start is settled unsent")
            return
        }
        guard case .send(let send) = slots.broadcast(flush(version: 2, offsets: []).push, activity: activity) else {
            Issue.record("an update is broadcast")
            return
        }
        #expect(send.channel == channel && send.token == .broadcastChannel && send.app == "scores" && !send.payload.isEmpty)
    }
}
