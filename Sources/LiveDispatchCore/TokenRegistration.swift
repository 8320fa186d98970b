/// Which APNs host a token belongs to.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case sandbox

    /// `api.push.apple.com` or `api.sandbox.push.apple.com`.
    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }
}

/// A device's update token for an activity, registered or unregistered by
/// the app's backend on the `tokens` topic (key = activity id), and kept in
/// the compacted `token-store` changelog.
public struct TokenRegistration: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable, CaseIterable {
        case register
        case unregister
    }

    public var activityID: ActivityID
    public var token: DeviceToken
    public var action: Action
    public var environment: APNsEnvironment
    /// After this time the registration no longer counts.
    public var expiresAt: UnixTime?
    /// When the worker stored the registration (kept in `token-store`); a
    /// token whose activity never gets a state expires `activity.max_age` after it.
    public var registeredAt: UnixTime?

    public init(
        activityID: ActivityID, token: DeviceToken, action: Action = .register,
        environment: APNsEnvironment = .production, expiresAt: UnixTime? = nil, registeredAt: UnixTime? = nil
    ) {
        self.activityID = activityID
        self.token = token
        self.action = action
        self.environment = environment
        self.expiresAt = expiresAt
        self.registeredAt = registeredAt
    }

    public init(json: JSONValue) throws(FieldError) {
        let reader = try FieldReader(json, what: "a token registration")
        try reader.rejectUnknown(["activity_id", "token", "action", "environment", "expires_at", "registered_at"])
        activityID = try reader.requiredActivityID("activity_id")
        token = try reader.requiredToken("token")
        guard token.bytes.count >= DeviceToken.minBytes else {
            throw FieldError(
                field: "token", message: "device token is \(token.bytes.count) bytes, shorter than \(DeviceToken.minBytes) (APNs tokens are at least 32 bytes)")
        }
        let actionName = try reader.string("action") ?? Action.register.rawValue
        guard let action = Action(rawValue: actionName) else {
            throw FieldError(field: "action", message: "\(actionName.debugDescription) is not an action (expected register or unregister)")
        }
        self.action = action
        let environmentName = try reader.string("environment") ?? APNsEnvironment.production.rawValue
        guard let environment = APNsEnvironment(rawValue: environmentName) else {
            throw FieldError(
                field: "environment", message: "\(environmentName.debugDescription) is not an environment (expected production or sandbox)")
        }
        self.environment = environment
        expiresAt = try reader.date("expires_at")
        registeredAt = try reader.date("registered_at")
    }

    public init(bytes: [UInt8]) throws(FieldError) {
        try self.init(json: try FieldReader.parse(bytes))
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "activity_id": .string(activityID.rawValue), "token": .string(token.hex),
            "action": .string(action.rawValue), "environment": .string(environment.rawValue),
        ]
        if let expiresAt { fields["expires_at"] = .double(expiresAt.seconds) }
        if let registeredAt { fields["registered_at"] = .double(registeredAt.seconds) }
        return .object(fields)
    }

    /// Whether the registration has lapsed at `now`.
    public func isExpired(at now: UnixTime) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }

    /// The `token-store` key: activity id, U+001F, token hex.
    public var storeKey: String { Self.storeKey(activityID, token) }

    /// The `token-store` key of `token` under `activity`.
    public static func storeKey(_ activity: ActivityID, _ token: DeviceToken) -> String {
        "\(activity.rawValue)\u{1F}\(token.hex)"
    }
}
