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
    /// Kafka refused for good a record produced for this one (too large, an
    /// invalid topic).
    public static let produceRefused: DeadLetterReason = "produce-refused"
    /// A push-to-start token was already sent `push_to_start.max_starts_per_hour`
    /// starts in the past hour: this start is not sent to it.
    public static let startRateLimited: DeadLetterReason = "start-rate-limited"
    /// The command's content-state, merged into the activity's, does not fit
    /// the activity's type: the app could not decode it and the device
    /// would drop the push.
    public static let contentStateMismatch: DeadLetterReason = "content-state-mismatch"
    /// The command's attributes do not fit the activity's type, or it names
    /// another type than the activity's.
    public static let attributesMismatch: DeadLetterReason = "attributes-mismatch"
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
        /// The original value as text when it is UTF-8.
        public var value: String?
        /// The original value in base64 when it is not UTF-8, so that no
        /// byte of it is lost.
        public var valueBase64: String?

        public init(topic: String, partition: Int32, offset: Int64, key: String? = nil, value: String? = nil, valueBase64: String? = nil) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
            self.key = key
            self.value = value
            self.valueBase64 = valueBase64
        }

        /// An origin keeping the record's value as text when it is UTF-8,
        /// else in base64.
        public init(topic: String, partition: Int32, offset: Int64, key: String?, valueBytes: [UInt8]?) {
            let text = valueBytes.flatMap { String(validating: $0, as: UTF8.self) }
            let base64 = text == nil ? valueBytes.map(Base64.encode) : nil
            self.init(topic: topic, partition: partition, offset: offset, key: key, value: text, valueBase64: base64)
        }

        public var json: JSONValue {
            var fields: [String: JSONValue] = [
                "topic": .string(topic), "partition": .integer(Int64(partition)), "offset": .integer(offset),
            ]
            if let key { fields["key"] = .string(key) }
            if let value { fields["value"] = .string(value) }
            if let valueBase64 { fields["value_base64"] = .string(valueBase64) }
            return .object(fields)
        }
    }

    /// Largest serialized dead letter produced: well under Kafka's default
    /// `message.max.bytes` (1 MB), so that a dead letter about a large
    /// record (a 900 KB value of control characters escapes to 5.4 MB) is
    /// still accepted. See ``serialized(maxBytes:)``.
    public static let maxBytes = 512 * 1024

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

    /// The dead letter as JSON bytes of at most `maxBytes`. One that is
    /// larger keeps its reason, rule, activity, token and origin topic,
    /// partition, offset and key, and the longest prefix of the original
    /// value (and of the message) that fits; `details.truncated` is true and
    /// `details.value_bytes` gives the original value's size.
    public func serialized(maxBytes: Int = DeadLetter.maxBytes) -> [UInt8] {
        let whole = json.serialized()
        guard whole.count > maxBytes else { return whole }
        var cut = self
        cut.details["truncated"] = .bool(true)
        if let text = origin?.value {
            cut.details["value_bytes"] = .integer(Int64(text.utf8.count))
        } else if let base64 = origin?.valueBase64 {
            let padding = base64.utf8.reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count
            cut.details["value_bytes"] = .integer(Int64(base64.utf8.count / 4 * 3 - padding))
        }
        let value = Array((origin?.value ?? origin?.valueBase64 ?? "").unicodeScalars)
        let message = Array(message.unicodeScalars)
        func candidate(valueScalars: Int, messageScalars: Int) -> [UInt8] {
            var letter = cut
            letter.message = String(String.UnicodeScalarView(message[0..<messageScalars]))
            let prefix = String(String.UnicodeScalarView(value[0..<valueScalars]))
            if letter.origin?.value != nil { letter.origin?.value = prefix }
            if letter.origin?.valueBase64 != nil { letter.origin?.valueBase64 = prefix }
            return letter.json.serialized()
        }
        // The message keeps its first 1,000 scalars unless even that is too much.
        var keptMessage = min(message.count, 1_000)
        var best = candidate(valueScalars: 0, messageScalars: keptMessage)
        if best.count > maxBytes {
            keptMessage = 0
            best = candidate(valueScalars: 0, messageScalars: 0)
        }
        // The longest prefix of the value that fits: escaping makes the size
        // grow unevenly with the length, so search for it.
        var low = 0
        var high = value.count
        while low < high {
            let middle = low + (high - low + 1) / 2
            let bytes = candidate(valueScalars: middle, messageScalars: keptMessage)
            if bytes.count <= maxBytes {
                low = middle
                best = bytes
            } else {
                high = middle - 1
            }
        }
        return best
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
                value: try originReader.string("value"),
                valueBase64: try originReader.string("value_base64"))
        } else {
            origin = nil
        }
        details = try reader.object("details")?.objectValue ?? [:]
        deadLetteredAt = try reader.date("dead_lettered_at") ?? UnixTime(seconds: 0)
    }
}

/// Standard base64 (RFC 4648) with padding, for bytes that are not text.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let first = UInt32(bytes[index])
            let second = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let third = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let group = first << 16 | second << 8 | third
            output.append(alphabet[Int(group >> 18 & 63)])
            output.append(alphabet[Int(group >> 12 & 63)])
            output.append(index + 1 < bytes.count ? alphabet[Int(group >> 6 & 63)] : UInt8(ascii: "="))
            output.append(index + 2 < bytes.count ? alphabet[Int(group & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
