/// One push of an activity's full state, as the coalescer flushes it and the
/// payload encoder writes it: everything in `aps` for one version.
public struct LiveActivityPush: Sendable, Hashable {
    public var activityID: ActivityID
    /// The activity's push count when this push was flushed; a token is
    /// never sent a version lower than one it already got.
    public var version: UInt64
    public var event: ActivityEvent
    /// The full merged `content-state` (never a diff).
    public var contentState: JSONValue
    /// `aps.timestamp`: never below the previous push's.
    public var timestamp: UnixTime
    public var priority: PushPriority
    public var staleDate: UnixTime?
    public var dismissalDate: UnixTime?
    public var relevanceScore: Double?
    public var alert: ActivityAlert?
    public var attributesType: String?
    public var attributes: JSONValue?
    public var inputPushToken: Bool?
    public var inputPushChannel: String?
    /// The priority the commands asked for when the priority budget sent
    /// this push at a lower one; nil when not downgraded.
    public var downgradedFrom: PushPriority?

    public init(
        activityID: ActivityID, version: UInt64, event: ActivityEvent, contentState: JSONValue, timestamp: UnixTime,
        priority: PushPriority = .immediate, staleDate: UnixTime? = nil, dismissalDate: UnixTime? = nil,
        relevanceScore: Double? = nil, alert: ActivityAlert? = nil, attributesType: String? = nil,
        attributes: JSONValue? = nil, inputPushToken: Bool? = nil, inputPushChannel: String? = nil,
        downgradedFrom: PushPriority? = nil
    ) {
        self.activityID = activityID
        self.version = version
        self.event = event
        self.contentState = contentState
        self.timestamp = timestamp
        self.priority = priority
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.alert = alert
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
        self.downgradedFrom = downgradedFrom
    }
}

extension LiveActivityPush {
    /// This version as a `start`: what a token is sent until it has been
    /// delivered the activity's start (an update or end to a device that
    /// never got the start shows nothing). Same version, content-state,
    /// attributes type and attributes; no dismissal date.
    public var asStart: LiveActivityPush {
        var start = self
        start.event = .start
        start.dismissalDate = nil
        return start
    }
}
