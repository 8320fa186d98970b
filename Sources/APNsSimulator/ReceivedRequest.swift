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

    public init(status: Int, reason: String? = nil, timestamp: Int64? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.retryAfter = retryAfter
    }

    public static let success = SimulatedResponse(status: 200)

    /// The response body: empty on success, `{"reason": …}` (with
    /// `timestamp` on 410) otherwise.
    public var body: [UInt8] {
        guard let reason else { return [] }
        var object: [String: JSONValue] = ["reason": .string(reason)]
        if let timestamp { object["timestamp"] = .integer(timestamp) }
        return JSONValue.object(object).serialized()
    }
}
