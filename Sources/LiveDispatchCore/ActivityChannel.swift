extension ChannelStoragePolicy {
    /// The policy of a broadcast activity's channel when its start names
    /// none: APNs keeps the newest push for a device that is offline, so it
    /// shows the latest state when it comes back.
    public static let defaultForActivities: ChannelStoragePolicy = .mostRecent
}

/// The broadcast channel of one activity: what its snapshot on `state`
/// keeps under `channel` and what its record on `channels` says.
public struct ActivityChannel: Sendable, Hashable {
    /// APNs' `apns-channel-id`.
    public var id: String
    public var environment: APNsEnvironment
    public var storagePolicy: ChannelStoragePolicy
    public var createdAt: UnixTime
    /// The app (`apps:`) whose bundle the channel belongs to; nil for the only app.
    public var app: String?

    public init(id: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy, createdAt: UnixTime, app: String? = nil) {
        self.id = id
        self.environment = environment
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
        self.app = app
    }

    /// The record on `channels` (key: the activity id):
    /// `{"activity_id", "channel_id", "environment", "storage_policy", "created_at"}`, and `"app"` when it names one.
    public func record(of activity: ActivityID) -> JSONValue {
        guard case .object(var fields) = json else { return json }
        fields["activity_id"] = .string(activity.rawValue)
        return .object(fields)
    }

    /// The channel's members inside a snapshot.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "channel_id": .string(id), "environment": .string(environment.rawValue),
            "storage_policy": .string(storagePolicy.description), "created_at": .double(createdAt.seconds),
        ]
        if let app { fields["app"] = .string(app) }
        return .object(fields)
    }

    /// Reads a channel written by ``json`` or ``record(of:)``.
    public init(json: JSONValue) throws(FieldError) {
        let reader = try FieldReader(json, what: "a broadcast channel")
        id = try reader.requiredString("channel_id")
        guard !id.isEmpty else { throw FieldError(field: reader.name("channel_id"), message: "is empty") }
        let environmentName = try reader.requiredString("environment")
        guard let environment = APNsEnvironment(rawValue: environmentName) else {
            throw FieldError(field: reader.name("environment"), message: "\(environmentName.debugDescription) is not production or sandbox")
        }
        self.environment = environment
        let policyName = try reader.requiredString("storage_policy")
        do {
            storagePolicy = try ChannelStoragePolicy(parsing: policyName)
        } catch {
            throw FieldError(field: reader.name("storage_policy"), message: error.message)
        }
        guard let createdAt = try reader.date("created_at") else { throw FieldError(field: reader.name("created_at"), message: "is required") }
        self.createdAt = createdAt
        app = try reader.appName()
    }

    /// The channel a snapshot on `state` names under `channel`; nil when it
    /// names none or an unreadable one (an older snapshot, or garbage: the
    /// activity then goes on without a channel rather than not at all).
    public static func inSnapshot(_ snapshot: JSONValue) -> ActivityChannel? {
        guard let value = snapshot["channel"] else { return nil }
        return try? ActivityChannel(json: value)
    }
}

extension DeviceToken {
    /// The fan-out's stand-in for an activity's broadcast channel: one more
    /// destination beside its update tokens, so coalescing, never-stale and
    /// retries per version apply to the channel as to a token. Registered
    /// tokens are at least ``minBytes`` long, so none can be this one.
    static let broadcastChannel = DeviceToken(unchecked: Array("channel".utf8))
}

extension PartitionDispatcher.Send {
    /// The request that delivers this send: to its device token, or to its
    /// channel (`apns-channel-id`, no `apns-topic`; `apns-expiration` 0 for
    /// a channel that stores nothing, as APNs requires).
    public func request(bundleID: String, apnsID: String, now: UnixTime) -> APNsRequest {
        guard let channel else {
            return APNsRequest(push: push, payload: payload, to: .device(token), bundleID: bundleID, apnsID: apnsID, now: now)
        }
        var request = APNsRequest(push: push, payload: payload, to: .channel(channel.id), bundleID: bundleID, apnsID: apnsID, now: now)
        if channel.storagePolicy == .noStorage { request.expiration = nil }
        return request
    }
}
