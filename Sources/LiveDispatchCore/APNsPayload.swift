/// A payload over APNs' size limit: never sent, dead-lettered with
/// ``DeadLetterReason/payloadTooLarge``.
public struct PayloadTooLargeError: Error, Sendable, Hashable, CustomStringConvertible {
    public var activityID: ActivityID
    public var size: Int
    public var limit: Int

    public init(activityID: ActivityID, size: Int, limit: Int) {
        self.activityID = activityID
        self.size = size
        self.limit = limit
    }

    public var description: String {
        "payload for activity \(activityID) is \(size) bytes, over the APNs limit of \(limit); shrink its content-state or attributes"
    }
}

/// Encodes the `aps` dictionary of a Live Activity push with Apple's exact
/// key names, refusing payloads APNs would reject for size.
public enum APNsPayload {
    /// Largest body APNs accepts for a push to a device token.
    public static let deviceLimit = 4096
    /// Largest body APNs accepts for a broadcast push to a channel.
    public static let broadcastLimit = 5120

    /// Where a payload goes decides its size limit.
    public enum Delivery: Sendable, Hashable {
        case device
        case broadcast

        public var limit: Int {
            switch self {
            case .device: APNsPayload.deviceLimit
            case .broadcast: APNsPayload.broadcastLimit
            }
        }
    }

    /// The `aps` members of `push`: `timestamp`, `event`, `content-state`
    /// always; `stale-date`, `dismissal-date`, `relevance-score`, `alert`,
    /// `attributes-type`, `attributes`, `input-push-token` and
    /// `input-push-channel` when set. Start-only members are written only
    /// for `start`; `dismissal-date` only for `end`.
    public static func aps(for push: LiveActivityPush) -> JSONValue {
        var aps: [String: JSONValue] = [
            "timestamp": .integer(push.timestamp.wholeSeconds),
            "event": .string(push.event.rawValue),
            "content-state": push.contentState,
        ]
        if let staleDate = push.staleDate { aps["stale-date"] = .integer(staleDate.wholeSeconds) }
        if let dismissalDate = push.dismissalDate, push.event == .end {
            aps["dismissal-date"] = .integer(dismissalDate.wholeSeconds)
        }
        if let relevanceScore = push.relevanceScore { aps["relevance-score"] = numberJSON(relevanceScore) }
        if let alert = push.alert { aps["alert"] = alert.json }
        if push.event == .start {
            if let attributesType = push.attributesType { aps["attributes-type"] = .string(attributesType) }
            if let attributes = push.attributes { aps["attributes"] = attributes }
            if push.inputPushToken == true { aps["input-push-token"] = .integer(1) }
            if let channel = push.inputPushChannel { aps["input-push-channel"] = .string(channel) }
        }
        return .object(aps)
    }

    /// The payload bytes for `push`, or ``PayloadTooLargeError`` when they
    /// exceed the limit for `delivery`.
    public static func encode(_ push: LiveActivityPush, for delivery: Delivery = .device) throws(PayloadTooLargeError) -> [UInt8] {
        let bytes = JSONValue.object(["aps": aps(for: push)]).serialized()
        guard bytes.count <= delivery.limit else {
            throw PayloadTooLargeError(activityID: push.activityID, size: bytes.count, limit: delivery.limit)
        }
        return bytes
    }

    /// The size in bytes of ``encode(_:for:)``'s payload for `push`,
    /// counted without encoding it.
    public static func size(of push: LiveActivityPush) -> Int {
        JSONValue.object(["aps": aps(for: push)]).serializedCount
    }

    private static func numberJSON(_ value: Double) -> JSONValue {
        if value.rounded(.towardZero) == value, let integer = Int64(exactly: value) { return .integer(integer) }
        return .double(value)
    }
}
