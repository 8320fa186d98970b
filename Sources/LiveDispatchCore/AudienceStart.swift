/// A start addressed to one audience, as the partition owning the activity
/// writes it to the internal `starts` topic (key = the audience key, so it
/// lands in the partition holding the audience's push-to-start tokens). It
/// carries the whole start as flushed: full content-state, attributes type
/// and attributes, alert, dates, timestamp and priority.
public struct AudienceStart: Sendable, Hashable {
    public var audience: AudienceKey
    /// The start, with `input-push-token` set.
    public var push: LiveActivityPush
    /// The activity's app: only its push-to-start tokens are sent the start.
    public var app: String?

    public init(audience: AudienceKey, push: LiveActivityPush, app: String? = nil) {
        self.audience = audience
        self.app = app
        var start = push.asStart
        start.inputPushToken = true
        self.push = start
    }

    static let fieldNames: Set<String> = [
        "audience", "activity_id", "version", "content_state", "timestamp", "priority", "stale_date", "relevance_score",
        "alert", "attributes_type", "attributes", "input_push_channel", "app",
    ]

    public init(json: JSONValue) throws(FieldError) {
        let reader = try FieldReader(json, what: "an audience start")
        try reader.rejectUnknown(Self.fieldNames)
        audience = try reader.requiredAudience("audience")
        guard let version = try reader.integer("version"), version > 0, let unsigned = UInt64(exactly: version) else {
            throw FieldError(field: "version", message: "expected the activity's version (1 or more)")
        }
        guard let timestamp = try reader.date("timestamp") else { throw FieldError(field: "timestamp", message: "is required") }
        guard let contentState = try reader.object("content_state") else { throw FieldError(field: "content_state", message: "is required") }
        guard let attributes = try reader.object("attributes") else { throw FieldError(field: "attributes", message: "is required") }
        let rawPriority = try reader.integer("priority") ?? 10
        let priority: PushPriority
        do {
            priority = try PushPriority(Int(clamping: rawPriority))
        } catch {
            throw FieldError(field: "priority", message: error.message)
        }
        let attributesType = try reader.requiredString("attributes_type")
        guard !attributesType.isEmpty else { throw FieldError(field: "attributes_type", message: "is empty") }
        let relevanceScore = try reader.number("relevance_score")
        if let relevanceScore, !relevanceScore.isFinite {
            throw FieldError(field: "relevance_score", message: "must be a finite number")
        }
        push = LiveActivityPush(
            activityID: try reader.requiredActivityID("activity_id"), version: unsigned, event: .start,
            contentState: contentState, timestamp: timestamp, priority: priority, staleDate: try reader.date("stale_date"),
            relevanceScore: relevanceScore,
            alert: try ActivityAlert(json: try reader.required("alert"), path: "alert"),
            attributesType: attributesType, attributes: attributes, inputPushToken: true,
            inputPushChannel: try reader.string("input_push_channel"))
        app = try reader.appName()
    }

    public init(bytes: [UInt8]) throws(FieldError) {
        try self.init(json: try FieldReader.parse(bytes))
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "audience": .string(audience.rawValue), "activity_id": .string(push.activityID.rawValue),
            "version": .integer(Int64(clamping: push.version)), "content_state": push.contentState,
            "timestamp": .double(push.timestamp.seconds), "priority": .integer(Int64(push.priority.rawValue)),
            "attributes_type": .string(push.attributesType ?? ""), "attributes": push.attributes ?? .object([:]),
        ]
        if let alert = push.alert { fields["alert"] = alert.json }
        if let staleDate = push.staleDate { fields["stale_date"] = .double(staleDate.seconds) }
        if let relevanceScore = push.relevanceScore { fields["relevance_score"] = .double(relevanceScore) }
        if let channel = push.inputPushChannel { fields["input_push_channel"] = .string(channel) }
        if let app { fields["app"] = .string(app) }
        return .object(fields)
    }
}
