/// Broadcast activities (iOS 18): the partition that owns the activity
/// creates its channel once, holds the activity's pushes (and its audience
/// starts) until the channel exists, keeps the channel in the activity's
/// snapshot and on `channels`, sends its updates and end to the channel as
/// one more destination of its ``FanOut``, and deletes the channel when the
/// activity expires after its end.
extension PartitionDispatcher {
    /// Channel management the owner performs, then reports with
    /// ``channelCreated(_:id:now:)``, ``channelCreateFailed(_:reason:retryable:now:jitter:)``
    /// or ``channelDeleted(_:_:failure:now:)``.
    public enum ChannelRequest: Sendable, Hashable {
        /// Create a channel for the activity in this environment, for its app (nil: the only app).
        case create(ActivityID, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy, app: String?)
        /// Delete the activity's channel (it ended and was dismissed).
        case delete(ActivityID, ActivityChannel)
    }

    /// An activity's channel: being created (with what waits for it) or created.
    enum ChannelSlot: Sendable {
        case creating(ChannelCreation)
        case ready(ActivityChannel)
        /// The activity expired while its channel was being created: the
        /// channel is deleted as soon as APNs names it.
        case abandoned(ChannelCreation)
    }

    struct ChannelCreation: Sendable {
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
        var audiences: (keys: [AudienceKey], push: LiveActivityPush, app: String?)?
    }

    /// The channel of an activity, once created.
    public func channel(of activity: ActivityID) -> ActivityChannel? {
        if case .ready(let channel)? = channels[activity] { return channel }
        return nil
    }

    /// Whether a channel is being created for an activity.
    public func isCreatingChannel(for activity: ActivityID) -> Bool {
        if case .creating? = channels[activity] { return true }
        return false
    }

    var isCreatingChannels: Bool {
        channels.values.contains { if case .creating = $0 { true } else { false } }
    }

    // MARK: Inputs

    /// A broadcast start of an activity without a channel asks for one.
    mutating func beginChannel(for command: ActivityCommand) -> [Action] {
        let activity = command.activityID
        guard command.event == .start, command.broadcast == true, channels[activity] == nil else { return [] }
        // The app's own environment; a start names its app when there are several.
        let app = try? configuration.apps.resolve(command.app ?? state(of: activity)?.app, required: false)
        let creation = ChannelCreation(
            environment: (app ?? nil)?.environment ?? configuration.defaultEnvironment,
            storagePolicy: command.storagePolicy ?? .defaultForActivities, app: command.app ?? state(of: activity)?.app)
        channels[activity] = .creating(creation)
        return [.channel(.create(activity, environment: creation.environment, storagePolicy: creation.storagePolicy, app: creation.app))]
    }

    /// Holds `flush` while the activity's channel is being created; true when held.
    mutating func holdUntilChannel(_ flush: Coalescer.Flush) -> Bool {
        let activity = flush.push.activityID
        guard case .creating(var creation)? = channels[activity] else { return false }
        creation.held = creation.held.map { Self.merged($0, flush) } ?? flush
        channels[activity] = .creating(creation)
        return true
    }

    /// Starts the audiences of a start, with `input-push-channel` when the
    /// activity has a channel, or holds them until it has.
    mutating func startAudiencesWithChannel(_ keys: [AudienceKey], _ push: LiveActivityPush, app: String?) -> [Action] {
        let activity = push.activityID
        switch channels[activity] {
        case .creating(var creation)?:
            creation.audiences = (keys, push, app)
            channels[activity] = .creating(creation)
            return []
        case .ready(let channel)?:
            var subscribing = push
            subscribing.inputPushChannel = channel.id
            return startAudiences(keys, subscribing, app: app)
        case .abandoned?, nil:
            return startAudiences(keys, push, app: app)
        }
    }

    /// APNs created the activity's channel: it goes on `channels`, becomes
    /// a destination of the activity's fan-out, and what waited is sent.
    public mutating func channelCreated(_ activity: ActivityID, id: String, now: UnixTime) -> [Action] {
        let creation: ChannelCreation
        switch channels[activity] {
        case .creating(let pending)?:
            creation = pending
        case .abandoned(let pending)?:
            channels.removeValue(forKey: activity)
            return [.channel(.delete(activity, ActivityChannel(
                id: id, environment: pending.environment, storagePolicy: pending.storagePolicy, createdAt: now, app: pending.app)))]
        case .ready?, nil:
            return []
        }
        let channel = ActivityChannel(
            id: id, environment: creation.environment, storagePolicy: creation.storagePolicy, createdAt: now, app: creation.app)
        channels[activity] = .ready(channel)
        var actions: [Action] = [
            .produce(Produce(
                topic: .channels, key: activity.rawValue, value: channel.record(of: activity).serialized(), partition: partition,
                ticket: issueTicket(.nothing))),
            .observe(.channelCreated(activity, channel)),
        ]
        actions += addChannelDestination(activity, now: now)
        return actions + release(creation, channel: channel, now: now)
    }

    /// Creating the channel failed: retried with the retry policy
    /// (`retry.*`) while `retryable`, then dead-lettered
    /// (`channel-create-failed`); the activity then goes on without one.
    public mutating func channelCreateFailed(
        _ activity: ActivityID, reason: String, retryable: Bool, now: UnixTime, jitter: Double
    ) -> [Action] {
        if case .abandoned? = channels[activity] {
            channels.removeValue(forKey: activity)
            return []
        }
        guard case .creating(var creation)? = channels[activity] else { return [] }
        let retry = configuration.fanOut.retry
        let firstFailureAt = creation.firstFailureAt ?? now
        if retryable, creation.attempts < retry.maxAttempts, now - firstFailureAt < retry.maxElapsed {
            creation.firstFailureAt = firstFailureAt
            let at = now + retry.delay(attempt: creation.attempts, jitter: jitter)
            channels[activity] = .creating(creation)
            wakes.schedule(.retryChannel(activity), at: at)
            return []
        }
        channels.removeValue(forKey: activity)
        let letter = DeadLetter(
            reason: .channelCreateFailed,
            message: "creating the broadcast channel of activity \(activity) failed after \(creation.attempts) attempt(s): \(reason); its pushes go to its tokens only",
            activityID: activity,
            details: [
                "apns.reason": .string(reason), "attempts": .integer(Int64(creation.attempts)),
                "environment": .string(creation.environment.rawValue), "storage_policy": .string(creation.storagePolicy.description),
            ],
            deadLetteredAt: now)
        let actions: [Action] = [
            .produce(Produce(topic: .deadLetters, key: activity.rawValue, value: letter.serialized(), partition: nil, ticket: issueTicket(.nothing))),
            .observe(.deadLettered(letter)),
        ]
        return actions + release(creation, channel: nil, now: now)
    }

    /// A channel's deletion ended; `failure` says why it failed.
    public mutating func channelDeleted(_ activity: ActivityID, _ channel: ActivityChannel, failure: String?, now: UnixTime) -> [Action] {
        guard let failure else { return [.observe(.channelDeleted(activity, channelID: channel.id))] }
        let letter = DeadLetter(
            reason: .channelDeleteFailed,
            message: "deleting broadcast channel \(channel.id) of expired activity \(activity) failed: \(failure); delete it with `livedispatch channels delete`",
            activityID: activity,
            details: ["channel_id": .string(channel.id), "environment": .string(channel.environment.rawValue), "apns.reason": .string(failure)],
            deadLetteredAt: now)
        return [
            .produce(Produce(topic: .deadLetters, key: activity.rawValue, value: letter.serialized(), partition: nil, ticket: issueTicket(.nothing))),
            .observe(.deadLettered(letter)),
        ]
    }

    // MARK: Internals

    mutating func channelRetryTimer(for activity: ActivityID) -> [Action] {
        if case .abandoned? = channels[activity] {
            // Expired before the retry: nothing to create, nothing to delete.
            channels.removeValue(forKey: activity)
            return []
        }
        guard case .creating(var creation)? = channels[activity] else { return [] }
        creation.attempts += 1
        channels[activity] = .creating(creation)
        return [.channel(.create(activity, environment: creation.environment, storagePolicy: creation.storagePolicy, app: creation.app))]
    }

    /// The channel joins the activity's fan-out holding the version its
    /// tokens were last sent: it is sent only what comes after.
    private mutating func addChannelDestination(_ activity: ActivityID, now: UnixTime) -> [Action] {
        var delivery = deliveries.removeValue(forKey: activity) ?? ActivityDelivery(fanOut: makeFanOut(activity))
        let added = delivery.fanOut.addToken(.broadcastChannel, sendCurrent: false, now: now)
        deliveries[activity] = delivery
        return perform(added, for: activity, now: now)
    }

    /// Sends what waited for the channel; the start carries its id.
    private mutating func release(_ creation: ChannelCreation, channel: ActivityChannel?, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        if let (keys, push, app) = creation.audiences {
            var subscribing = push
            subscribing.inputPushChannel = channel?.id
            actions += startAudiences(keys, subscribing, app: app)
        }
        if var held = creation.held {
            if held.push.event == .start { held.push.inputPushChannel = channel?.id }
            actions += publish(held, now: now)
        }
        return actions
    }

    /// Restored channels become destinations of their activities' fan-outs.
    mutating func installRestoredChannels(now: UnixTime) {
        for (activity, slot) in channels {
            guard case .ready = slot else { continue }
            _ = addChannelDestination(activity, now: now)
        }
    }

    /// The send of `push` to the activity's channel, or the fan-out's
    /// actions when it needs none: a start is not broadcast (devices
    /// subscribe through the start's `input-push-channel`), and a payload
    /// over the broadcast limit is refused.
    mutating func broadcastSend(_ push: LiveActivityPush, activity: ActivityID, now: UnixTime) -> (Send?, [FanOut.Action]) {
        let settle = { (dispatcher: inout PartitionDispatcher, outcome: FanOut.Outcome) -> [FanOut.Action] in
            dispatcher.deliveries[activity]?.fanOut.completed(token: .broadcastChannel, version: push.version, outcome: outcome, now: now, jitter: 0) ?? []
        }
        guard case .ready(let channel)? = channels[activity] else {
            return (nil, settle(&self, .permanent(reason: "activity \(activity) has no broadcast channel")))
        }
        if push.event == .start { return (nil, settle(&self, .delivered)) }
        do {
            let payload = try APNsPayload.encode(push, for: .broadcast)
            let send = Send(
                activityID: activity, token: .broadcastChannel, environment: channel.environment, app: channel.app,
                push: push, payload: payload, channel: channel)
            return (send, [])
        } catch {
            return (nil, settle(&self, .permanent(reason: error.description)))
        }
    }

    /// The channel an expired activity leaves: delete it and tombstone its
    /// `channels` record. Returns the offsets of pushes held for a channel
    /// still being created (they are done: the activity is gone).
    mutating func channelExpired(_ activity: ActivityID) -> (actions: [Action], heldOffsets: [Int64]) {
        switch channels.removeValue(forKey: activity) {
        case .ready(let channel)?:
            return ([
                .channel(.delete(activity, channel)),
                .produce(Produce(topic: .channels, key: activity.rawValue, value: nil, partition: partition, ticket: issueTicket(.nothing))),
            ], [])
        case .creating(let creation)?:
            // Its create request is under way or waits for a retry: what APNs creates is deleted.
            channels[activity] = .abandoned(creation)
            return ([], creation.held?.offsets ?? [])
        case .abandoned(let creation)?:
            channels[activity] = .abandoned(creation)
            return ([], [])
        case nil:
            return ([], [])
        }
    }

    /// APNs refused the channel for good (deleted, or unknown): the
    /// activity's pushes go on to its tokens; the channel is dead-lettered.
    mutating func channelRefused(_ activity: ActivityID, reason: String, now: UnixTime) -> [Action] {
        let channelID = channel(of: activity)?.id ?? "(none)"
        let letter = DeadLetter(
            reason: .apnsRejected, message: "APNs refused broadcast channel \(channelID) of activity \(activity): \(reason); its pushes go to its tokens only",
            activityID: activity, details: ["channel_id": .string(channelID), "apns.reason": .string(reason)], deadLetteredAt: now)
        deliveries[activity]?.pendingAcks += 1
        return [
            .produce(Produce(
                topic: .deadLetters, key: activity.rawValue, value: letter.serialized(), partition: nil,
                ticket: issueTicket(.deadLetterForActivity(activity)))),
            .observe(.deadLettered(letter)),
        ]
    }

    /// Where a failed send went, for its dead letter.
    func destinationName(_ token: DeviceToken, of activity: ActivityID) -> String {
        guard token == .broadcastChannel else { return "token \(token.hex)" }
        return "broadcast channel \(channel(of: activity)?.id ?? "(none)")"
    }
}

extension PartitionDispatcher.ActivityDelivery {
    /// The activity's device tokens, its channel not counted.
    var deviceTokenCount: Int { fanOut.tokenCount - (fanOut.contains(.broadcastChannel) ? 1 : 0) }
}

extension DeadLetterReason {
    /// Creating a broadcast activity's channel failed after its retries.
    public static let channelCreateFailed: DeadLetterReason = "channel-create-failed"
    /// Deleting an expired broadcast activity's channel failed.
    public static let channelDeleteFailed: DeadLetterReason = "channel-delete-failed"
}
