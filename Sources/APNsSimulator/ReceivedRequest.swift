import LiveDispatchCore

/// A request stream as it arrived: pseudo-headers, headers in order, body.
struct ReceivedRequest: Sendable {
    var streamID: Int32
    var headers = HeaderBlock()
    var body: [UInt8] = []
    /// Body bytes received in all, even those not kept beyond ``bodyLimit``.
    var bodySize = 0

    /// Bytes of body kept; beyond this the request is refused as too large anyway.
    static let bodyLimit = 65_536

    init(streamID: Int32) { self.streamID = streamID }

    mutating func appendBody(_ bytes: [UInt8]) {
        bodySize += bytes.count
        if body.count < Self.bodyLimit { body.append(contentsOf: bytes.prefix(Self.bodyLimit - body.count)) }
    }
}

/// The answer to one push: status, APNs reason and, for 410, when the
/// token stopped being valid (milliseconds).
public struct SimulatedResponse: Sendable, Hashable {
    public var status: Int
    public var reason: String?
    public var timestamp: Int64?
    /// Seconds sent as `retry-after`, when set.
    public var retryAfter: Int?
    /// Further response headers (`apns-channel-id`, `apns-request-id`).
    public var headers: [HeaderField]
    /// A JSON body of a success (a channel or the channel list).
    public var content: JSONValue?

    public init(
        status: Int, reason: String? = nil, timestamp: Int64? = nil, retryAfter: Int? = nil,
        headers: [HeaderField] = [], content: JSONValue? = nil
    ) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.retryAfter = retryAfter
        self.headers = headers
        self.content = content
    }

    public static let success = SimulatedResponse(status: 200)

    /// The response body: empty on success (or `content`), `{"reason": …}` (with
    /// `timestamp` on 410) otherwise.
    public var body: [UInt8] {
        if let content { return content.serialized() }
        guard let reason else { return [] }
        var object: [String: JSONValue] = ["reason": .string(reason)]
        if let timestamp { object["timestamp"] = .integer(timestamp) }
        return JSONValue.object(object).serialized()
    }
}
