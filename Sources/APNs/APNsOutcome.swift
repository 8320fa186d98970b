import LiveDispatchCore

/// What became of one push: the classification the dispatcher acts on.
public enum APNsOutcome: Sendable, Hashable {
    /// APNs accepted the push (200); the `apns-id` it echoed.
    case delivered(apnsID: String)
    /// The device token is no longer valid and must be removed: 410
    /// `Unregistered`/`ExpiredToken` (with the time APNs last knew it valid)
    /// or 400 `BadDeviceToken`.
    case tokenInvalid(reason: APNsReason, since: UnixTime?)
    /// APNs refused this push for good (other 4xx); dead-letter it.
    case permanent(status: Int, reason: APNsReason)
    /// The push may succeed later: 429, 5xx, a timeout, a reset connection.
    case retryable(RetryableFailure)
    /// No push can succeed until an operator fixes the key, team, topic or
    /// environment (`InvalidProviderToken`, a key that cannot sign, …).
    case misconfigured(APNsError)

    /// Why a retryable push failed.
    public struct RetryableFailure: Sendable, Hashable {
        /// The HTTP status when APNs answered, nil for transport failures.
        public var status: Int?
        public var reason: APNsReason?
        /// What went wrong, for logs and dead letters.
        public var error: APNsError
        /// A `retry-after` the server sent, in seconds.
        public var retryAfter: Double?

        public init(status: Int?, reason: APNsReason?, error: APNsError, retryAfter: Double?) {
            self.status = status
            self.reason = reason
            self.error = error
            self.retryAfter = retryAfter
        }
    }

    /// Every ``label``, for metrics made ahead of the first push.
    public static let labels = ["delivered", "token_invalid", "permanent", "retryable", "misconfigured"]

    /// A short label for metrics and logs: `delivered`, `token_invalid`, …
    public var label: String {
        switch self {
        case .delivered: "delivered"
        case .tokenInvalid: "token_invalid"
        case .permanent: "permanent"
        case .retryable: "retryable"
        case .misconfigured: "misconfigured"
        }
    }
}

/// The answer to a request sent with ``APNsConnectionPool/exchange(_:)``:
/// its classification, and the status, headers and body when the server
/// answered (nil status: no answer, see `outcome`).
public struct APNsExchange: Sendable, Hashable {
    public var outcome: APNsOutcome
    public var status: Int?
    /// Response headers by lowercase name.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(outcome: APNsOutcome, status: Int?, headers: [String: String], body: [UInt8]) {
        self.outcome = outcome
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A response from the server, before classification.
struct APNsResponse: Sendable, Hashable {
    var status: Int
    /// The `apns-id` the server echoed, read apart from the other headers:
    /// every response carries one, and only it.
    var apnsID: String?
    /// The other headers read (`retry-after`, `apns-unique-id`, …), by lowercase name.
    var headers: [String: String]
    var body: [UInt8]

    init(status: Int, apnsID: String? = nil, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.apnsID = apnsID ?? headers["apns-id"]
        var headers = headers
        headers["apns-id"] = nil
        self.headers = headers
        self.body = body
    }

    /// Every header read, `apns-id` included.
    var allHeaders: [String: String] {
        guard let apnsID else { return headers }
        var all = headers
        all["apns-id"] = apnsID
        return all
    }

    /// `reason` and, for 410, `timestamp` (milliseconds) from the JSON body.
    var reasonAndTimestamp: (reason: APNsReason?, timestamp: UnixTime?) {
        guard !body.isEmpty, let json = try? JSONValue.parse(body), let object = json.objectValue else {
            return (nil, nil)
        }
        let reason = object["reason"]?.stringValue.map(APNsReason.init)
        let timestamp = object["timestamp"]?.numberValue.map { UnixTime(seconds: $0 / 1000) }
        return (reason, timestamp)
    }

    /// Whether APNs asked for the push to go over another connection:
    /// 503 `Shutdown` (the server is going away) or 403
    /// `UnrelatedKeyIdInToken` (the connection is bound to another key).
    var asksForAnotherConnection: Bool {
        guard status == 503 || status == 403 else { return false }
        let reason = reasonAndTimestamp.reason
        return (status == 503 && reason == .shutdown) || (status == 403 && reason == .unrelatedKeyIDInToken)
    }

    /// Longest `retry-after` honoured: a larger (or infinite) one would park a
    /// token's retries far beyond `retry.max_elapsed`.
    static let maxRetryAfter: Double = 3600

    /// `retry-after` in seconds: a finite, non-negative number, at most
    /// ``maxRetryAfter``; nil for anything else.
    static func retryAfterSeconds(_ text: String) -> Double? {
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else { return nil }
        return min(seconds, maxRetryAfter)
    }

    /// Classifies the response. `requestAPNsID` stands in when a server
    /// echoes no `apns-id`.
    func outcome(requestAPNsID: String) -> APNsOutcome {
        if (200..<300).contains(status) {
            return .delivered(apnsID: apnsID ?? requestAPNsID)
        }
        let (parsedReason, timestamp) = reasonAndTimestamp
        let retryAfter = headers["retry-after"].flatMap(Self.retryAfterSeconds)
        switch status {
        case 410:
            return .tokenInvalid(reason: parsedReason ?? .unregistered, since: timestamp)
        case 400 where parsedReason == .badDeviceToken:
            return .tokenInvalid(reason: .badDeviceToken, since: nil)
        case 429, 500...599:
            let reason = parsedReason ?? .unknown("HTTP \(status)")
            return .retryable(
                .init(status: status, reason: reason, error: .serverRefused(status: status, reason: reason),
                    retryAfter: retryAfter))
        default:
            let reason = parsedReason ?? .unknown("HTTP \(status)")
            if status == 403, reason.isConfigurationError || reason == .unrelatedKeyIDInToken {
                return .misconfigured(.providerTokenRejected(reason: reason))
            }
            if reason.isConfigurationError {
                return .misconfigured(.pushRejectedForConfiguration(status: status, reason: reason))
            }
            return .permanent(status: status, reason: reason)
        }
    }
}
