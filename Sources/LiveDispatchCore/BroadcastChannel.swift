/// How APNs keeps broadcast pushes for devices that are offline
/// (`message-storage-policy`): `noStorage` (0) delivers now or never, and
/// then `apns-expiration` must be 0; `mostRecent` (1) keeps the newest one.
public enum ChannelStoragePolicy: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case noStorage = 0
    case mostRecent = 1

    /// Reads `0`, `1`, `no-storage` or `most-recent`.
    public init(parsing text: String) throws(ValueError) {
        switch text {
        case "0", "no-storage": self = .noStorage
        case "1", "most-recent": self = .mostRecent
        default:
            throw ValueError("\(text.debugDescription) is not a message storage policy (0 or no-storage, 1 or most-recent)")
        }
    }

    public var description: String {
        switch self {
        case .noStorage: "no-storage"
        case .mostRecent: "most-recent"
        }
    }
}

/// A request to the broadcast channel management API
/// (`api-manage-broadcast[.sandbox].push.apple.com`): create, read or
/// delete one channel of an app, or list them all.
public enum ChannelOperation: Sendable, Hashable {
    /// `POST /1/apps/<bundle>/channels` with the policy; APNs answers 201 and `apns-channel-id`.
    case create(ChannelStoragePolicy)
    /// `GET /1/apps/<bundle>/channels` with `apns-channel-id`.
    case read(channelID: String)
    /// `DELETE /1/apps/<bundle>/channels` with `apns-channel-id`.
    case delete(channelID: String)
    /// `GET /1/apps/<bundle>/all-channels`.
    case list

    /// The HTTP method.
    public var method: String {
        switch self {
        case .create: "POST"
        case .read, .list: "GET"
        case .delete: "DELETE"
        }
    }

    /// The `:path` for `bundleID`.
    public func path(bundleID: String) -> String {
        switch self {
        case .create, .read, .delete: "/1/apps/\(bundleID)/channels"
        case .list: "/1/apps/\(bundleID)/all-channels"
        }
    }

    /// The channel the request names, sent as `apns-channel-id`.
    public var channelID: String? {
        switch self {
        case .read(let channelID), .delete(let channelID): channelID
        case .create, .list: nil
        }
    }

    /// The request body: the policy and push type of a new channel, empty otherwise.
    public var body: [UInt8] {
        switch self {
        case .create(let policy):
            JSONValue.object([
                "message-storage-policy": .integer(Int64(policy.rawValue)), "push-type": .string("LiveActivity"),
            ]).serialized()
        case .read, .delete, .list:
            []
        }
    }
}
