/// Broadcast activities (iOS 18): what the partition writes and sends as
/// ``ChannelSlots`` decides. The partition that owns the activity creates
/// its channel once, holds the activity's pushes (and its audience starts)
/// until the channel exists, keeps the channel in the activity's snapshot
/// and on `channels`, sends its updates and end to the channel as one more
/// destination of its ``FanOut``, and deletes the channel when the activity
/// expires after its end.
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

    /// The channel of an activity, once created.
    public func channel(of activity: ActivityID) -> ActivityChannel? { channels.channel(of: activity) }

    /// Whether a channel is being created for an activity.
    public func isCreatingChannel(for activity: ActivityID) -> Bool { channels.isCreating(activity) }

    // MARK: Inputs

    /// APNs created the activity's channel: it goes on `channels`, becomes
    /// a destination of the activity's fan-out, and what waited is sent.
    public mutating func channelCreated(_ activity: ActivityID, id: String, now: UnixTime) -> [Action] {
        switch channels.created(activity, id: id, now: now) {
        case .ready(let channel, let creation):
            var actions: [Action] = [
                writes.produce(.channels, key: activity.rawValue, value: channel.record(of: activity).serialized(), then: .nothing),
                .observe(.channelCreated(activity, channel)),
            ]
            actions += addChannelDestination(activity, now: now)
            return actions + release(creation, channel: channel, now: now)
        case .delete(let channel):
            return [.channel(.delete(activity, channel))]
        case .ignored:
            return []
        }
    }

    /// Creating the channel failed: retried with the retry policy
    /// (`retry.*`) while `retryable`, then dead-lettered
    /// (`channel-create-failed`); the activity then goes on without one.
    public mutating func channelCreateFailed(
        _ activity: ActivityID, reason: String, retryable: Bool, now: UnixTime, jitter: Double
    ) -> [Action] {
        switch channels.createFailed(activity, retryable: retryable, retry: configuration.fanOut.retry, now: now, jitter: jitter) {
        case .ignored:
            return []
        case .retry(let at):
            wakes.schedule(.retryChannel(activity), at: at)
            return []
        case .gaveUp(let creation):
            let letter = DeadLetter(
                reason: .channelCreateFailed,
                message: "creating the broadcast channel of activity \(activity) failed after \(creation.attempts) attempt(s): \(reason); its pushes go to its tokens only",
                activityID: activity,
                details: [
                    "apns.reason": .string(reason), "attempts": .integer(Int64(creation.attempts)),
                    "environment": .string(creation.environment.rawValue), "storage_policy": .string(creation.storagePolicy.description),
                ],
                deadLetteredAt: now)
            return writes.deadLetter(letter, key: activity.rawValue, then: .nothing) + release(creation, channel: nil, now: now)
        }
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
        return writes.deadLetter(letter, key: activity.rawValue, then: .nothing)
    }

    // MARK: Internals

    /// A broadcast start of an activity without a channel asks for one, in
    /// its app's own environment (a start names its app when there are several).
    mutating func beginChannel(for command: ActivityCommand) -> [Action] {
        guard command.event == .start, command.broadcast == true else { return [] }
        let activity = command.activityID
        let appName = command.app ?? state(of: activity)?.app
        let app = try? configuration.apps.resolve(appName, required: false)
        let request = channels.begin(
            activity, environment: (app ?? nil)?.environment ?? configuration.defaultEnvironment,
            storagePolicy: command.storagePolicy ?? .defaultForActivities, app: appName)
        return request.map { [.channel($0)] } ?? []
    }

    /// Starts the audiences of a start, with `input-push-channel` when the
    /// activity has a channel, or holds them until it has.
    mutating func startAudiencesWithChannel(_ keys: [AudienceKey], _ push: LiveActivityPush, app: String?) -> [Action] {
        guard let push = channels.holdAudiences(.init(keys: keys, push: push, app: app)) else { return [] }
        return startAudiences(keys, push, app: app)
    }

    /// Writes one audience start per audience of a start command (key: the
    /// audience, so the producer's murmur2 partitioner puts it in the
    /// audience's partition). The activity's snapshot, and so its command's
    /// offset, waits for Kafka to acknowledge them.
    mutating func startAudiences(_ keys: [AudienceKey], _ push: LiveActivityPush, app: String?) -> [Action] {
        let activity = push.activityID
        activities.awaitWrites(keys.count, of: activity, version: coalescer.version(of: activity))
        return keys.map { audience in
            writes.produceByKey(
                .starts, key: audience.rawValue, value: AudienceStart(audience: audience, push: push, app: app).json.serialized(),
                then: .awaitedBy(.activity(activity)))
        }
    }

    mutating func channelRetryTimer(for activity: ActivityID) -> [Action] {
        channels.retryTimer(for: activity).map { [.channel($0)] } ?? []
    }

    private mutating func addChannelDestination(_ activity: ActivityID, now: UnixTime) -> [Action] {
        let added = activities.addChannel(activity, version: coalescer.version(of: activity), now: now)
        return perform(added, for: .activity(activity), now: now)
    }

    /// Sends what waited for the channel; the start carries its id.
    private mutating func release(_ creation: ChannelSlots.Creation, channel: ActivityChannel?, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        if let audiences = creation.audiences {
            var subscribing = audiences.push
            subscribing.inputPushChannel = channel?.id
            actions += startAudiences(audiences.keys, subscribing, app: audiences.app)
        }
        if var held = creation.held {
            if held.push.event == .start { held.push.inputPushChannel = channel?.id }
            actions += publish(held, now: now)
        }
        return actions
    }

    /// Restored channels become destinations of their activities' fan-outs.
    mutating func installRestoredChannels(now: UnixTime) {
        for activity in channels.readyActivities {
            _ = addChannelDestination(activity, now: now)
        }
    }

    /// The channel an expired activity leaves: delete it and tombstone its
    /// `channels` record. Returns the offsets of pushes held for a channel
    /// still being created (they are done: the activity is gone).
    mutating func channelExpired(_ activity: ActivityID) -> (actions: [Action], heldOffsets: [Int64]) {
        let (channel, heldOffsets) = channels.expired(activity)
        guard let channel else { return ([], heldOffsets) }
        return ([.channel(.delete(activity, channel)), writes.produce(.channels, key: activity.rawValue, value: nil, then: .nothing)], heldOffsets)
    }

    /// APNs refused the channel for good (deleted, or unknown): the
    /// activity's pushes go on to its tokens; the channel is dead-lettered.
    mutating func channelRefused(_ activity: ActivityID, reason: String, now: UnixTime) -> [Action] {
        let channelID = channel(of: activity)?.id ?? "(none)"
        let letter = DeadLetter(
            reason: .apnsRejected, message: "APNs refused broadcast channel \(channelID) of activity \(activity): \(reason); its pushes go to its tokens only",
            activityID: activity, details: ["channel_id": .string(channelID), "apns.reason": .string(reason)], deadLetteredAt: now)
        activities.awaitWrite(of: activity)
        return writes.deadLetter(letter, key: activity.rawValue, then: .awaitedBy(.activity(activity)))
    }
}
