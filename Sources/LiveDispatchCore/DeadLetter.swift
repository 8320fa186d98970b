/// Why a record or a push went to the `dead-letters` topic. A struct over a
/// string so that reasons can grow; the known ones are static members.
public struct DeadLetterReason: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }

    public var description: String { rawValue }

    /// An update or start for an activity that has ended.
    public static let activityEnded: DeadLetterReason = "activity-ended"
    /// The encoded payload is over APNs' limit.
    public static let payloadTooLarge: DeadLetterReason = "payload-too-large"
    /// The record value is not JSON.
    public static let invalidJSON: DeadLetterReason = "invalid-json"
    /// The record is JSON but not a valid command or registration.
    public static let invalidCommand: DeadLetterReason = "invalid-command"
    /// A rule failed on the event (missing field, type error, schema mismatch).
    public static let ruleError: DeadLetterReason = "rule-error"
    /// APNs refused the push for good (a 4xx other than a token refresh case).
    public static let apnsRejected: DeadLetterReason = "apns-rejected"
    /// Retries ran out (`retry.max_attempts` or `retry.max_elapsed`).
    public static let retriesExhausted: DeadLetterReason = "retries-exhausted"
    /// The activity expired (`activity.max_age`) before the command was sent.
    public static let activityExpired: DeadLetterReason = "activity-expired"
}

/// A record LiveDispatch could not handle, with the reason and enough of
/// the original to replay it.
public struct DeadLetter: Sendable, Hashable {
    /// Where the original record was read.
    public struct Origin: Sendable, Hashable {
        public var topic: String
        public var partition: Int32
        public var offset: Int64
        public var key: String?
        /// The original value as text when it is UTF-8, else nil.
        public var value: String?

        public init(topic: String, partition: Int32, offset: Int64, key: String? = nil, value: String? = nil) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
            self.key = key
            self.value = value
        }

        public var json: JSONValue {
            var fields: [String: JSONValue] = [
                "topic": .string(topic), "partition": .integer(Int64(partition)), "offset": .integer(offset),
            ]
            if let key { fields["key"] = .string(key) }
            if let value { fields["value"] = .string(value) }
            return .object(fields)
        }
    }

    public var reason: DeadLetterReason
    /// A sentence for a person: what was wrong and where.
    public var message: String
    public var activityID: ActivityID?
    /// The token a push to which failed, when the failure was per token.
    public var token: DeviceToken?
    public var rule: String?
    public var origin: Origin?
    /// Extra facts (`size`, `limit`, `apns.reason`, `attempts` …).
    public var details: [String: JSONValue]
    public var deadLetteredAt: UnixTime

    public init(
        reason: DeadLetterReason, message: String, activityID: ActivityID? = nil, token: DeviceToken? = nil,
        rule: String? = nil, origin: Origin? = nil, details: [String: JSONValue] = [:], deadLetteredAt: UnixTime
    ) {
        self.reason = reason
        self.message = message
        self.activityID = activityID
        self.token = token
        self.rule = rule
        self.origin = origin
        self.details = details
        self.deadLetteredAt = deadLetteredAt
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "reason": .string(reason.rawValue), "message": .string(message),
            "dead_lettered_at": .double(deadLetteredAt.seconds),
        ]
        if let activityID { fields["activity_id"] = .string(activityID.rawValue) }
        if let token { fields["token"] = .string(token.hex) }
        if let rule { fields["rule"] = .string(rule) }
        if let origin { fields["origin"] = origin.json }
        if !details.isEmpty { fields["details"] = .object(details) }
        return .object(fields)
    }

    public init(json: JSONValue) throws(FieldError) {
        let reader = try FieldReader(json, what: "a dead letter")
        reason = DeadLetterReason(try reader.requiredString("reason"))
        message = try reader.requiredString("message")
        activityID = try reader.activityID("activity_id")
        token = try reader.token("token")
        rule = try reader.string("rule")
        if let originValue = try reader.object("origin") {
            let originReader = try FieldReader(originValue, path: "origin", what: "an origin")
            origin = Origin(
                topic: try originReader.requiredString("topic"),
                partition: Int32(clamping: try originReader.integer("partition") ?? 0),
                offset: try originReader.integer("offset") ?? 0,
                key: try originReader.string("key"),
                value: try originReader.string("value"))
        } else {
            origin = nil
        }
        details = try reader.object("details")?.objectValue ?? [:]
        deadLetteredAt = try reader.date("dead_lettered_at") ?? UnixTime(seconds: 0)
    }
}
