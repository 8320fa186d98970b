/// What became of one completed push version of an activity, for the
/// `outcomes` topic and webhooks.
public struct PushOutcome: Sendable, Hashable {
    public var activityID: ActivityID
    public var app: String?
    /// The version, event, completion time and how its sends ended.
    public var summary: PushSummary
    /// The activity's device tokens when it completed.
    public var tokens: Int
    /// The ids of the commands it carried (the newest ``Coalescer/Flush/maxCommandIDs``).
    public var commandIDs: [String]

    public init(activityID: ActivityID, app: String?, summary: PushSummary, tokens: Int, commandIDs: [String]) {
        self.activityID = activityID
        self.app = app
        self.summary = summary
        self.tokens = tokens
        self.commandIDs = commandIDs
    }
}

/// One record of the public `outcomes` topic (key: the activity id), and
/// of a webhook's body: a completed push version, an audience start, or a
/// token removed. Each has an ``id`` that names the same outcome again if
/// it is published again (a push redone after a crash), so receivers can
/// drop repeats.
public enum Outcome: Sendable, Hashable {
    case push(PushOutcome)
    /// A start sent to an audience's push-to-start tokens.
    case audienceStart(ActivityID, audience: AudienceKey, delivered: [DeviceToken], alreadyStarted: Int, at: UnixTime)
    /// A token removed from an activity (APNs said it is gone, or it expired).
    case tokenRemoved(ActivityID, token: DeviceToken, reason: String, at: UnixTime)

    /// The outcome an observation of the dispatcher stands for, if any.
    /// `now` is read only for an observation that stands for one.
    public static func of(_ observation: PartitionDispatcher.Observation, now: @autoclosure () -> UnixTime) -> Outcome? {
        switch observation {
        case .pushCompleted(_, _, _, _, let outcome): .push(outcome)
        case .audienceStarted(let activity, let audience, let delivered, let alreadyStarted):
            .audienceStart(activity, audience: audience, delivered: delivered, alreadyStarted: alreadyStarted, at: now())
        case .tokenRemoved(let activity, let token, let reason): .tokenRemoved(activity, token: token, reason: reason, at: now())
        case .pushTraced, .deadLettered, .activityExpired, .duplicateCommand, .uncheckedCommand, .priorityDowngraded,
             .channelCreated, .channelDeleted:
            nil
        }
    }

    public var activityID: ActivityID {
        switch self {
        case .push(let push): push.activityID
        case .audienceStart(let activity, _, _, _, _), .tokenRemoved(let activity, _, _, _): activity
        }
    }

    /// `push:<activity>:<version>`, `audience-start:<activity>:<audience>:<ms>`
    /// or `token-removed:<activity>:<token>:<ms>`.
    public var id: String {
        switch self {
        case .push(let push): "push:\(push.activityID):\(push.summary.version)"
        case .audienceStart(let activity, let audience, _, _, let at): "audience-start:\(activity):\(audience):\(Self.milliseconds(at))"
        case .tokenRemoved(let activity, let token, _, let at): "token-removed:\(activity):\(token.hex):\(Self.milliseconds(at))"
        }
    }

    public var kind: String {
        switch self {
        case .push: "push"
        case .audienceStart: "audience_start"
        case .tokenRemoved: "token_removed"
        }
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = ["id": .string(id), "kind": .string(kind), "activity_id": .string(activityID.rawValue)]
        switch self {
        case .push(let push):
            let summary = push.summary
            fields["version"] = .integer(Int64(clamping: summary.version))
            fields["event"] = .string(summary.event.rawValue)
            fields["at"] = .double(summary.completedAt.seconds)
            fields["delivered"] = .integer(Int64(clamping: summary.delivered))
            fields["failed"] = .object(summary.failed.mapValues { .integer(Int64(clamping: $0)) })
            fields["tokens"] = .integer(Int64(clamping: push.tokens))
            fields["commands"] = .integer(Int64(clamping: summary.commands))
            fields["command_ids"] = .array(push.commandIDs.map(JSONValue.string))
            if let app = push.app { fields["app"] = .string(app) }
        case .audienceStart(_, let audience, let delivered, let alreadyStarted, let at):
            fields["audience"] = .string(audience.rawValue)
            fields["at"] = .double(at.seconds)
            fields["started"] = .array(delivered.map { .string($0.hex) })
            fields["skipped"] = .object(alreadyStarted > 0 ? ["already-started": .integer(Int64(clamping: alreadyStarted))] : [:])
        case .tokenRemoved(_, let token, let reason, let at):
            fields["token"] = .string(token.hex)
            fields["reason"] = .string(reason)
            fields["at"] = .double(at.seconds)
        }
        return .object(fields)
    }

    private static func milliseconds(_ time: UnixTime) -> Int64 {
        Int64(exactly: (time.seconds * 1000).rounded(.down)) ?? 0
    }
}
