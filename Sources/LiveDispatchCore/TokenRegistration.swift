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

/// A registration that honours `expires_at`.
public protocol Expiring {
    /// After this time the registration no longer counts.
    var expiresAt: UnixTime? { get }
}

extension Expiring {
    /// Whether the registration has lapsed at `now`.
    public func isExpired(at now: UnixTime) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}

/// Which token a registration on the `tokens` topic carries (`kind`).
public enum TokenKind: String, Sendable, Hashable, CaseIterable {
    /// A running activity's update token, registered under its activity id.
    case update
    /// The app's push-to-start token for one attributes type (iOS 17.2+),
    /// registered in an audience.
    case pushToStart = "push_to_start"

    init(_ reader: FieldReader) throws(FieldError) {
        let name = try reader.string("kind") ?? TokenKind.update.rawValue
        guard let kind = TokenKind(rawValue: name) else {
            throw FieldError(field: reader.name("kind"), message: "\(name.debugDescription) is not a token kind (expected update or push_to_start)")
        }
        self = kind
    }
}

/// A device's update token for an activity, registered or unregistered by
/// the app's backend on the `tokens` topic (key = activity id), and kept in
/// the compacted `token-store` changelog.
public struct TokenRegistration: Sendable, Hashable, Expiring {
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
    /// How the last push to the token ended, as the dispatcher records it in
    /// `token-store` (see ``TokenOutcome``); a registration on `tokens` that
    /// carries one has it ignored.
    public var lastOutcome: TokenOutcome?
    /// The app the token belongs to (`apps:`); nil for the only app.
    public var app: String?

    public init(
        activityID: ActivityID, token: DeviceToken, action: Action = .register,
        environment: APNsEnvironment = .production, expiresAt: UnixTime? = nil, registeredAt: UnixTime? = nil,
        lastOutcome: TokenOutcome? = nil, app: String? = nil
    ) {
        self.activityID = activityID
        self.token = token
        self.action = action
        self.environment = environment
        self.expiresAt = expiresAt
        self.registeredAt = registeredAt
        self.lastOutcome = lastOutcome
        self.app = app
    }

    static let storedFieldNames: Set<String> = [
        "kind", "activity_id", "token", "action", "environment", "expires_at", "registered_at", "last_outcome", "app",
    ]

    /// Reads a registration; with `apps`, its app is checked (it must be
    /// configured, and named when there are several) and a token naming no
    /// environment takes its app's.
    public init(json: JSONValue, apps: AppDirectory = .unchecked) throws(FieldError) {
        let reader = try FieldReader(json, what: "a token registration")
        guard try TokenKind(reader) == .update else {
            throw FieldError(field: "kind", message: "a push_to_start token is read as a PushToStartRegistration (it has an audience, not an activity id)")
        }
        for field in ["audience", "attributes_type"] where reader.fields[field] != nil {
            throw FieldError(field: field, message: "belongs to a push_to_start token; an update token names only its activity_id")
        }
        try reader.rejectUnknown(Self.storedFieldNames)
        activityID = try reader.requiredActivityID("activity_id")
        (token, action, environment, expiresAt, registeredAt, app) = try Self.commonFields(reader, apps: apps)
        lastOutcome = try reader.object("last_outcome").map { value throws(FieldError) in
            try TokenOutcome(FieldReader(value, path: reader.name("last_outcome"), what: "a token outcome"))
        }
    }

    /// The fields both kinds share: token, action, environment, expiry,
    /// registration time and app.
    static func commonFields(_ reader: FieldReader, apps: AppDirectory) throws(FieldError)
        -> (DeviceToken, Action, APNsEnvironment, UnixTime?, UnixTime?, String?)
    {
        let token = try reader.requiredToken("token")
        guard token.count >= DeviceToken.minBytes else {
            throw FieldError(
                field: "token", message: "device token is \(token.count) bytes, shorter than \(DeviceToken.minBytes) (APNs tokens are at least 32 bytes)")
        }
        let actionName = try reader.string("action") ?? Action.register.rawValue
        guard let action = Action(rawValue: actionName) else {
            throw FieldError(field: "action", message: "\(actionName.debugDescription) is not an action (expected register or unregister)")
        }
        let named = try reader.appName()
        // An unregistration removes the token whatever its app.
        let app = try apps.resolve(named, required: action == .register)
        var environment = app?.environment ?? .production
        if let environmentName = try reader.string("environment") {
            guard let given = APNsEnvironment(rawValue: environmentName) else {
                throw FieldError(
                    field: "environment", message: "\(environmentName.debugDescription) is not an environment (expected production or sandbox)")
            }
            environment = given
        }
        return (token, action, environment, try reader.date("expires_at"), try reader.date("registered_at"), named)
    }

    /// The JSON members both kinds share.
    static func commonJSON(
        token: DeviceToken, action: Action, environment: APNsEnvironment, expiresAt: UnixTime?, registeredAt: UnixTime?, app: String?
    ) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "token": .string(token.hex), "action": .string(action.rawValue), "environment": .string(environment.rawValue),
        ]
        if let app { fields["app"] = .string(app) }
        if let expiresAt { fields["expires_at"] = .double(expiresAt.seconds) }
        if let registeredAt { fields["registered_at"] = .double(registeredAt.seconds) }
        return fields
    }

    public init(bytes: [UInt8], apps: AppDirectory = .unchecked) throws(FieldError) {
        try self.init(json: try FieldReader.parse(bytes), apps: apps)
    }

    public var json: JSONValue {
        var fields = Self.commonJSON(token: token, action: action, environment: environment, expiresAt: expiresAt, registeredAt: registeredAt, app: app)
        fields["activity_id"] = .string(activityID.rawValue)
        if let lastOutcome { fields["last_outcome"] = lastOutcome.json }
        return .object(fields)
    }

    /// The `token-store` key: activity id, U+001F, token hex.
    public var storeKey: String { Self.storeKey(activityID, token) }

    /// The `token-store` key of `token` under `activity`.
    public static func storeKey(_ activity: ActivityID, _ token: DeviceToken) -> String {
        "\(activity.rawValue)\u{1F}\(token.hex)"
    }
}

/// An app's push-to-start token for one `ActivityAttributes` type, in an
/// audience chosen by the backend: a `start` addressed to the audience is
/// sent to it (with `input-push-token: 1`). On the `tokens` topic its key is
/// the audience key; in `token-store` it is kept under ``storeKey``.
public struct PushToStartRegistration: Sendable, Hashable, Expiring {
    public var audience: AudienceKey
    /// The Swift type name of the app's `ActivityAttributes` the token starts.
    public var attributesType: String
    public var token: DeviceToken
    public var action: TokenRegistration.Action
    public var environment: APNsEnvironment
    public var expiresAt: UnixTime?
    public var registeredAt: UnixTime?
    /// The app the token belongs to (`apps:`); nil for the only app. An
    /// audience start of one app goes only to that app's tokens.
    public var app: String?
    /// The backend's name for the device (or user) the token is on: a new
    /// token of the same device, app and attributes type in the audience
    /// replaces the one registered before.
    public var device: String?
    /// Longest device name, in UTF-8 bytes.
    public static let maxDeviceBytes = 200

    public init(
        audience: AudienceKey, attributesType: String, token: DeviceToken, action: TokenRegistration.Action = .register,
        environment: APNsEnvironment = .production, expiresAt: UnixTime? = nil, registeredAt: UnixTime? = nil, app: String? = nil,
        device: String? = nil
    ) {
        self.app = app
        self.device = device
        self.audience = audience
        self.attributesType = attributesType
        self.token = token
        self.action = action
        self.environment = environment
        self.expiresAt = expiresAt
        self.registeredAt = registeredAt
    }

    static let fieldNames: Set<String> = [
        "kind", "audience", "attributes_type", "token", "action", "environment", "expires_at", "registered_at", "app", "device",
    ]

    /// Reads a registration whose `kind` is `push_to_start`; `apps` as for
    /// ``TokenRegistration/init(json:apps:)``.
    public init(json: JSONValue, apps: AppDirectory = .unchecked) throws(FieldError) {
        let reader = try FieldReader(json, what: "a push-to-start token registration")
        guard try TokenKind(reader) == .pushToStart else {
            throw FieldError(field: "kind", message: "is not push_to_start")
        }
        if reader.fields["activity_id"] != nil {
            throw FieldError(
                field: "activity_id",
                message: "a push_to_start token belongs to an audience, not an activity (after a start the device registers a new update token under the activity id)")
        }
        try reader.rejectUnknown(Self.fieldNames)
        audience = try reader.requiredAudience("audience")
        attributesType = try reader.requiredString("attributes_type")
        guard !attributesType.isEmpty, attributesType.utf8.count <= 256 else {
            throw FieldError(field: "attributes_type", message: "must be a Swift type name of 1 to 256 bytes")
        }
        (token, action, environment, expiresAt, registeredAt, app) = try TokenRegistration.commonFields(reader, apps: apps)
        device = try reader.string("device")
        if let device {
            guard !device.isEmpty, device.utf8.count <= Self.maxDeviceBytes,
                  !device.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw FieldError(field: "device", message: "must be 1 to \(Self.maxDeviceBytes) bytes of text without control characters")
            }
        }
    }

    public var json: JSONValue {
        var fields = TokenRegistration.commonJSON(
            token: token, action: action, environment: environment, expiresAt: expiresAt, registeredAt: registeredAt, app: app)
        fields["kind"] = .string(TokenKind.pushToStart.rawValue)
        fields["audience"] = .string(audience.rawValue)
        fields["attributes_type"] = .string(attributesType)
        if let device { fields["device"] = .string(device) }
        return .object(fields)
    }

    /// The `token-store` key: audience, U+001E, token hex (U+001E, not an
    /// update token's U+001F, so an audience and an activity of one name
    /// never share a key).
    public var storeKey: String { Self.storeKey(audience, token) }

    public static func storeKey(_ audience: AudienceKey, _ token: DeviceToken) -> String {
        "\(audience.rawValue)\u{1E}\(token.hex)"
    }
}

/// A record of the `tokens` topic: an update token or a push-to-start token,
/// told apart by `kind` (default `update`).
public enum TokenRecord: Sendable, Hashable {
    case update(TokenRegistration)
    case pushToStart(PushToStartRegistration)

    public init(json: JSONValue, apps: AppDirectory = .unchecked) throws(FieldError) {
        switch try TokenKind(FieldReader(json, what: "a token registration")) {
        case .update: self = .update(try TokenRegistration(json: json, apps: apps))
        case .pushToStart: self = .pushToStart(try PushToStartRegistration(json: json, apps: apps))
        }
    }

    public init(bytes: [UInt8], apps: AppDirectory = .unchecked) throws(FieldError) {
        try self.init(json: try FieldReader.parse(bytes), apps: apps)
    }

    /// The Kafka key the record must have: the activity id or the audience key.
    public var key: String {
        switch self {
        case .update(let registration): registration.activityID.rawValue
        case .pushToStart(let registration): registration.audience.rawValue
        }
    }

    public var json: JSONValue {
        switch self {
        case .update(let registration): registration.json
        case .pushToStart(let registration): registration.json
        }
    }
}
