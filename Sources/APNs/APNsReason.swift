/// A `reason` APNs gives for a refused push: every reason of Apple's table,
/// with ``unknown(_:)`` for any Apple adds later.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    // 400
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyIDInToken, badEnvironmentKeyInToken
    // 404, 405
    case badPath, methodNotAllowed
    // 410
    case expiredToken, unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates, tooManyRequests
    // 500, 503
    case internalServerError, serviceUnavailable, shutdown
    /// A reason this version does not know, as sent.
    case unknown(String)

    private static let known: [(APNsReason, String)] = [
        (.badCollapseID, "BadCollapseId"), (.badDeviceToken, "BadDeviceToken"),
        (.badExpirationDate, "BadExpirationDate"), (.badMessageID, "BadMessageId"), (.badPriority, "BadPriority"),
        (.badTopic, "BadTopic"), (.deviceTokenNotForTopic, "DeviceTokenNotForTopic"),
        (.duplicateHeaders, "DuplicateHeaders"), (.idleTimeout, "IdleTimeout"), (.invalidPushType, "InvalidPushType"),
        (.missingDeviceToken, "MissingDeviceToken"), (.missingTopic, "MissingTopic"), (.payloadEmpty, "PayloadEmpty"),
        (.topicDisallowed, "TopicDisallowed"), (.badCertificate, "BadCertificate"),
        (.badCertificateEnvironment, "BadCertificateEnvironment"), (.expiredProviderToken, "ExpiredProviderToken"),
        (.forbidden, "Forbidden"), (.invalidProviderToken, "InvalidProviderToken"),
        (.missingProviderToken, "MissingProviderToken"), (.unrelatedKeyIDInToken, "UnrelatedKeyIdInToken"),
        (.badEnvironmentKeyIDInToken, "BadEnvironmentKeyIdInToken"),
        (.badEnvironmentKeyInToken, "BadEnvironmentKeyInToken"), (.badPath, "BadPath"),
        (.methodNotAllowed, "MethodNotAllowed"), (.expiredToken, "ExpiredToken"), (.unregistered, "Unregistered"),
        (.payloadTooLarge, "PayloadTooLarge"), (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates"),
        (.tooManyRequests, "TooManyRequests"), (.internalServerError, "InternalServerError"),
        (.serviceUnavailable, "ServiceUnavailable"), (.shutdown, "Shutdown"),
    ]
    private static let byName: [String: APNsReason] = Dictionary(uniqueKeysWithValues: known.map { ($0.1, $0.0) })

    /// Every reason Apple documents, for tests and documentation.
    public static var allKnown: [APNsReason] { known.map(\.0) }

    /// The reason for Apple's spelling; ``unknown(_:)`` when not in the table.
    public init(_ text: String) {
        self = Self.byName[text] ?? .unknown(text)
    }

    /// Apple's spelling, as in the response body.
    public var description: String {
        if case .unknown(let text) = self { return text }
        return Self.known.first { $0.0 == self }?.1 ?? "Unknown"
    }

    /// Reasons that mean the provider's key, team, topic or environment is
    /// configured wrongly: no push can succeed until an operator fixes it.
    public var isConfigurationError: Bool {
        switch self {
        case .badCertificate, .badCertificateEnvironment, .forbidden, .invalidProviderToken, .missingProviderToken,
            .badEnvironmentKeyIDInToken, .badEnvironmentKeyInToken, .topicDisallowed, .badTopic:
            true
        default:
            false
        }
    }
}
