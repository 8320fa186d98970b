/// One push of an activity's full state, as the coalescer flushes it and the
/// payload encoder writes it: everything in `aps` for one version.
public struct LiveActivityPush: Sendable, Hashable {
    /// The fields, held once per push and shared by every copy: a fan-out
    /// hands the same push to a million sends, each of which would
    /// otherwise copy some 200 bytes and retain every string in it.
    /// Changing a field copies them (copy on write).
    struct Fields: Sendable, Hashable {
        var activityID: ActivityID
        var version: UInt64
        var event: ActivityEvent
        var contentState: JSONValue
        var timestamp: UnixTime
        var priority: PushPriority
        var staleDate: UnixTime?
        var dismissalDate: UnixTime?
        var relevanceScore: Double?
        var alert: ActivityAlert?
        var attributesType: String?
        var attributes: JSONValue?
        var inputPushToken: Bool?
        var inputPushChannel: String?
        var downgradedFrom: PushPriority?
        var traceContext: TraceContext?
    }

    private final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    private mutating func update(_ change: (inout Fields) -> Void) {
        var fields = storage.fields
        change(&fields)
        storage = Storage(fields)
    }

    public var activityID: ActivityID {
        get { storage.fields.activityID }
        set { update { $0.activityID = newValue } }
    }
    /// The activity's push count when this push was flushed; a token is
    /// never sent a version lower than one it already got.
    public var version: UInt64 {
        get { storage.fields.version }
        set { update { $0.version = newValue } }
    }
    public var event: ActivityEvent {
        get { storage.fields.event }
        set { update { $0.event = newValue } }
    }
    /// The full merged `content-state` (never a diff).
    public var contentState: JSONValue {
        get { storage.fields.contentState }
        set { update { $0.contentState = newValue } }
    }
    /// `aps.timestamp`: never below the previous push's.
    public var timestamp: UnixTime {
        get { storage.fields.timestamp }
        set { update { $0.timestamp = newValue } }
    }
    public var priority: PushPriority {
        get { storage.fields.priority }
        set { update { $0.priority = newValue } }
    }
    public var staleDate: UnixTime? {
        get { storage.fields.staleDate }
        set { update { $0.staleDate = newValue } }
    }
    public var dismissalDate: UnixTime? {
        get { storage.fields.dismissalDate }
        set { update { $0.dismissalDate = newValue } }
    }
    public var relevanceScore: Double? {
        get { storage.fields.relevanceScore }
        set { update { $0.relevanceScore = newValue } }
    }
    public var alert: ActivityAlert? {
        get { storage.fields.alert }
        set { update { $0.alert = newValue } }
    }
    public var attributesType: String? {
        get { storage.fields.attributesType }
        set { update { $0.attributesType = newValue } }
    }
    public var attributes: JSONValue? {
        get { storage.fields.attributes }
        set { update { $0.attributes = newValue } }
    }
    public var inputPushToken: Bool? {
        get { storage.fields.inputPushToken }
        set { update { $0.inputPushToken = newValue } }
    }
    public var inputPushChannel: String? {
        get { storage.fields.inputPushChannel }
        set { update { $0.inputPushChannel = newValue } }
    }
    /// The priority the commands asked for when the priority budget sent
    /// this push at a lower one; nil when not downgraded.
    public var downgradedFrom: PushPriority? {
        get { storage.fields.downgradedFrom }
        set { update { $0.downgradedFrom = newValue } }
    }

    /// The context of the push's span when it merged a traced command
    /// (``PushTrace/context``): the parent of its APNs requests' spans.
    public var traceContext: TraceContext? {
        get { storage.fields.traceContext }
        set { update { $0.traceContext = newValue } }
    }

    public init(
        activityID: ActivityID, version: UInt64, event: ActivityEvent, contentState: JSONValue, timestamp: UnixTime,
        priority: PushPriority = .immediate, staleDate: UnixTime? = nil, dismissalDate: UnixTime? = nil,
        relevanceScore: Double? = nil, alert: ActivityAlert? = nil, attributesType: String? = nil,
        attributes: JSONValue? = nil, inputPushToken: Bool? = nil, inputPushChannel: String? = nil,
        downgradedFrom: PushPriority? = nil, traceContext: TraceContext? = nil
    ) {
        storage = Storage(Fields(
            activityID: activityID, version: version, event: event, contentState: contentState, timestamp: timestamp,
            priority: priority, staleDate: staleDate, dismissalDate: dismissalDate, relevanceScore: relevanceScore,
            alert: alert, attributesType: attributesType, attributes: attributes, inputPushToken: inputPushToken,
            inputPushChannel: inputPushChannel, downgradedFrom: downgradedFrom, traceContext: traceContext))
    }

    public static func == (lhs: LiveActivityPush, rhs: LiveActivityPush) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) {
        storage.fields.hash(into: &hasher)
    }
}

extension LiveActivityPush {
    /// This version as an update token takes it: a `start` becomes an
    /// `update` of the same version and state, without the attributes and
    /// input-push fields only a start carries (an update token belongs to an
    /// activity already on its device). Updates and ends are unchanged.
    public var asUpdate: LiveActivityPush {
        guard event == .start else { return self }
        var update = self
        update.update { fields in
            fields.event = .update
            fields.dismissalDate = nil
            fields.attributesType = nil
            fields.attributes = nil
            fields.inputPushToken = nil
            fields.inputPushChannel = nil
        }
        return update
    }

    /// This version as a `start`, for a push-to-start token: same version,
    /// content-state, attributes type and attributes; no dismissal date.
    public var asStart: LiveActivityPush {
        var start = self
        start.update { fields in
            fields.event = .start
            fields.dismissalDate = nil
        }
        return start
    }
}
