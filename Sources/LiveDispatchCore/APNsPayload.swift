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
        // Read back from the bytes: one description of the payload.
        (try? JSONValue.parse(bytes(for: push)))?["aps"] ?? .null
    }

    /// The payload bytes for `push`, or ``PayloadTooLargeError`` when they
    /// exceed the limit for `delivery`.
    public static func encode(_ push: LiveActivityPush, for delivery: Delivery = .device) throws(PayloadTooLargeError) -> [UInt8] {
        try checked(bytes(for: push), of: push.activityID, for: delivery)
    }

    /// `bytes`, a payload of `activityID` already written, or
    /// ``PayloadTooLargeError`` when they exceed the limit for `delivery`.
    static func checked(_ bytes: [UInt8], of activityID: ActivityID, for delivery: Delivery = .device) throws(PayloadTooLargeError) -> [UInt8] {
        guard bytes.count <= delivery.limit else {
            throw PayloadTooLargeError(activityID: activityID, size: bytes.count, limit: delivery.limit)
        }
        return bytes
    }

    /// The size in bytes of ``encode(_:for:)``'s payload for `push` (written
    /// and counted).
    public static func size(of push: LiveActivityPush) -> Int {
        bytes(for: push).count
    }

    /// The payload's bytes, `{"aps": …}`, written member by member in the
    /// serializer's key order.
    static func bytes(for push: LiveActivityPush) -> [UInt8] {
        var aps = JSONObjectWriter(prefix: Array(#"{"aps":"#.utf8), capacity: 512)
        // Keys in the serializer's order (sorted by their bytes).
        aps.member("alert", push.alert) { $0.write(to: &$1, wire: true) }
        let start = push.event == .start
        if start {
            aps.value("attributes", push.attributes)
            aps.string("attributes-type", push.attributesType)
        }
        aps.value("content-state", push.contentState)
        if push.event == .end { aps.integer("dismissal-date", push.dismissalDate?.wholeSeconds) }
        aps.string("event", push.event.rawValue)
        if start {
            aps.string("input-push-channel", push.inputPushChannel)
            if push.inputPushToken == true { aps.integer("input-push-token", 1) }
        }
        aps.value("relevance-score", push.relevanceScore.map(numberJSON))
        aps.integer("stale-date", push.staleDate?.wholeSeconds)
        aps.integer("timestamp", push.timestamp.wholeSeconds)
        var output = aps.finish()
        output.append(UInt8(ascii: "}"))
        return output
    }

    private static func numberJSON(_ value: Double) -> JSONValue {
        if value.rounded(.towardZero) == value, let integer = Int64(exactly: value) { return .integer(integer) }
        return .double(value)
    }
}

/// The encoded payloads of a fan-out's newest version, written once and
/// shared by every token's send: the version as published and, for tokens
/// still owed their start, the same version as a start.
struct PayloadCache: Sendable {
    private var payloads: [ActivityEvent: (version: UInt64, bytes: [UInt8])] = [:]

    /// Keeps `bytes` as the payload of `push`.
    mutating func keep(_ bytes: [UInt8], for push: LiveActivityPush) {
        payloads[push.event] = (push.version, bytes)
    }

    /// The payload of `push` for a device, encoded on its first use.
    mutating func payload(for push: LiveActivityPush) -> Result<[UInt8], PayloadTooLargeError> {
        if let cached = payloads[push.event], cached.version == push.version { return .success(cached.bytes) }
        let encoded = Self.encode(push)
        if case .success(let bytes) = encoded { keep(bytes, for: push) }
        return encoded
    }

    /// The payload of `push` for a device, not kept.
    static func encode(_ push: LiveActivityPush) -> Result<[UInt8], PayloadTooLargeError> {
        Result { () throws(PayloadTooLargeError) in try APNsPayload.encode(push) }
    }
}
