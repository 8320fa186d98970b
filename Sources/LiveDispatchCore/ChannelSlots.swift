/// Broadcast activities' channels (iOS 18): decides when a channel is asked
/// for (once, at a broadcast start), what waits for it (the activity's
/// pushes and audience starts), when a failed create is retried or given
/// up, what is sent to a channel, and which channel an expired activity
/// leaves to delete.
struct ChannelSlots: Sendable {
    /// An activity's channel: being created (with what waits for it) or created.
    enum Slot: Sendable {
        case creating(Creation)
        case ready(ActivityChannel)
        /// The activity expired while its channel was being created: the
        /// channel is deleted as soon as APNs names it.
        case abandoned(Creation)
    }

    struct Creation: Sendable {
        var activityID: ActivityID
        var environment: APNsEnvironment
        var storagePolicy: ChannelStoragePolicy
        var app: String?
        /// Create requests made so far.
        var attempts = 1
        var firstFailureAt: UnixTime?
        /// The activity's pushes since its start, merged: published once
        /// the channel exists, so the start carries `input-push-channel`.
        var held: Coalescer.Flush?
        /// Audience starts waiting for the channel id.
        var audiences: AudienceRequest?

        var request: PartitionDispatcher.ChannelRequest {
            .create(activityID, environment: environment, storagePolicy: storagePolicy, app: app)
        }
    }

    /// The audiences a start names, with the push they are sent.
    struct AudienceRequest: Sendable {
        var keys: [AudienceKey]
        var push: LiveActivityPush
        var app: String?
    }

    /// What became of a create request that failed.
    enum Failure: Sendable {
        /// Nothing waits for it (created, abandoned or never asked for).
        case ignored
        case retry(at: UnixTime)
        /// Out of retries: what waited goes on without a channel.
        case gaveUp(Creation)
    }

    private var slots: [ActivityID: Slot] = [:]

    /// The channel of an activity, once created.
    func channel(of activity: ActivityID) -> ActivityChannel? {
        if case .ready(let channel)? = slots[activity] { return channel }
        return nil
    }

    func isCreating(_ activity: ActivityID) -> Bool {
        if case .creating? = slots[activity] { return true }
        return false
    }

    var isCreatingAny: Bool {
        slots.values.contains { if case .creating = $0 { true } else { false } }
    }

    /// Activities whose channel is created, for their fan-outs.
    var readyActivities: [ActivityID] {
        slots.compactMap { if case .ready = $0.value { $0.key } else { nil } }
    }

    /// The channel a snapshot read back from `state` names, or none.
    mutating func restore(_ activity: ActivityID, _ channel: ActivityChannel?) {
        slots[activity] = channel.map(Slot.ready)
    }

    mutating func forget(_ activity: ActivityID) {
        slots.removeValue(forKey: activity)
    }

    /// A broadcast start of an activity without a channel asks for one, in
    /// the environment of its app.
    mutating func begin(
        _ activity: ActivityID, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy, app: String?
    ) -> PartitionDispatcher.ChannelRequest? {
        guard slots[activity] == nil else { return nil }
        let creation = Creation(activityID: activity, environment: environment, storagePolicy: storagePolicy, app: app)
        slots[activity] = .creating(creation)
        return creation.request
    }

    /// Holds `flush` while the activity's channel is being created; true when held.
    mutating func hold(_ flush: Coalescer.Flush) -> Bool {
        let activity = flush.push.activityID
        guard case .creating(var creation)? = slots[activity] else { return false }
        creation.held = creation.held.map { .merged($0, flush) } ?? flush
        slots[activity] = .creating(creation)
        return true
    }

    /// Holds the audiences of a start while the channel is being created
    /// (nil); otherwise the push to start them with, carrying the channel
    /// id when there is one.
    mutating func holdAudiences(_ request: AudienceRequest) -> LiveActivityPush? {
        let activity = request.push.activityID
        switch slots[activity] {
        case .creating(var creation)?:
            creation.audiences = request
            slots[activity] = .creating(creation)
            return nil
        case .ready(let channel)?:
            var subscribing = request.push
            subscribing.inputPushChannel = channel.id
            return subscribing
        case .abandoned?, nil:
            return request.push
        }
    }

    /// APNs created a channel: the channel and what waited for it, or the
    /// channel to delete when its activity expired meanwhile.
    mutating func created(_ activity: ActivityID, id: String, now: UnixTime) -> Created {
        switch slots[activity] {
        case .creating(let creation)?:
            let channel = ActivityChannel(
                id: id, environment: creation.environment, storagePolicy: creation.storagePolicy, createdAt: now, app: creation.app)
            slots[activity] = .ready(channel)
            return .ready(channel, creation)
        case .abandoned(let creation)?:
            slots.removeValue(forKey: activity)
            return .delete(ActivityChannel(
                id: id, environment: creation.environment, storagePolicy: creation.storagePolicy, createdAt: now, app: creation.app))
        case .ready?, nil:
            return .ignored
        }
    }

    enum Created: Sendable {
        case ready(ActivityChannel, Creation)
        case delete(ActivityChannel)
        case ignored
    }

    /// A create request failed: retried with `retry` while `retryable`,
    /// then given up.
    mutating func createFailed(_ activity: ActivityID, retryable: Bool, retry: RetryPolicy, now: UnixTime, jitter: Double) -> Failure {
        switch slots[activity] {
        case .abandoned?:
            slots.removeValue(forKey: activity)
            return .ignored
        case .creating(var creation)?:
            let firstFailureAt = creation.firstFailureAt ?? now
            if retryable, creation.attempts < retry.maxAttempts, now - firstFailureAt < retry.maxElapsed {
                creation.firstFailureAt = firstFailureAt
                slots[activity] = .creating(creation)
                return .retry(at: now + retry.delay(attempt: creation.attempts, jitter: jitter))
            }
            slots.removeValue(forKey: activity)
            return .gaveUp(creation)
        case .ready?, nil:
            return .ignored
        }
    }

    /// The create request a retry makes, if the channel is still wanted.
    mutating func retryTimer(for activity: ActivityID) -> PartitionDispatcher.ChannelRequest? {
        switch slots[activity] {
        case .abandoned?:
            // Expired before the retry: nothing to create, nothing to delete.
            slots.removeValue(forKey: activity)
            return nil
        case .creating(var creation)?:
            creation.attempts += 1
            slots[activity] = .creating(creation)
            return creation.request
        case .ready?, nil:
            return nil
        }
    }

    /// What an expired activity leaves: its channel to delete, and the
    /// offsets of pushes held for a channel still being created (they are
    /// done: the activity is gone; what APNs creates is deleted).
    mutating func expired(_ activity: ActivityID) -> (delete: ActivityChannel?, heldOffsets: [Int64]) {
        switch slots.removeValue(forKey: activity) {
        case .ready(let channel)?:
            return (channel, [])
        case .creating(let creation)?:
            slots[activity] = .abandoned(creation)
            return (nil, creation.held?.offsets ?? [])
        case .abandoned(let creation)?:
            slots[activity] = .abandoned(creation)
            return (nil, [])
        case nil:
            return (nil, [])
        }
    }

    /// The send of `push` to the activity's channel, or the outcome it
    /// settles with unsent: a start is not broadcast (devices subscribe
    /// through the start's `input-push-channel`), and a payload over the
    /// broadcast limit is refused.
    func broadcast(_ push: LiveActivityPush, activity: ActivityID) -> PartitionDispatcher.SendPlan {
        guard let channel = channel(of: activity) else { return .settle(.permanent(reason: "activity \(activity) has no broadcast channel")) }
        if push.event == .start { return .settle(.delivered) }
        do throws(PayloadTooLargeError) {
            let payload = try APNsPayload.encode(push, for: .broadcast)
            return .send(PartitionDispatcher.Send(
                activityID: activity, token: .broadcastChannel, environment: channel.environment, app: channel.app,
                push: push, payload: payload, channel: channel))
        } catch {
            return .settle(.permanent(reason: error.description))
        }
    }
}

extension DeadLetterReason {
    /// Creating a broadcast activity's channel failed after its retries.
    public static let channelCreateFailed: DeadLetterReason = "channel-create-failed"
    /// Deleting an expired broadcast activity's channel failed.
    public static let channelDeleteFailed: DeadLetterReason = "channel-delete-failed"
}
