import Foundation
import LiveDispatchCore

/// What APNs knows of one broadcast channel (`GET /1/apps/<bundle>/channels`).
public struct BroadcastChannelInfo: Sendable, Hashable {
    public var channelID: String
    public var storagePolicy: ChannelStoragePolicy
    /// `LiveActivity`, the only kind APNs has.
    public var pushType: String

    public init(channelID: String, storagePolicy: ChannelStoragePolicy, pushType: String) {
        self.channelID = channelID
        self.storagePolicy = storagePolicy
        self.pushType = pushType
    }
}

/// Why a channel management request failed: APNs' status and reason when
/// it answered (`ChannelNotRegistered`, `CannotCreateChannelConfig`, …), or
/// the transport's error. `isRetryable` as for pushes.
public struct BroadcastChannelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status, nil when no answer came.
    public var status: Int?
    /// APNs' reason, when it gave one.
    public var reason: String?
    public var message: String
    public var isRetryable: Bool

    public init(status: Int?, reason: String?, message: String, isRetryable: Bool) {
        self.status = status
        self.reason = reason
        self.message = message
        self.isRetryable = isRetryable
    }

    public var description: String { message }
}

/// The broadcast channel management API of one app over an
/// ``APNsConnectionPool`` connected to `api-manage-broadcast` (or a
/// simulator serving it): the same HTTP/2 connections, provider tokens,
/// deadlines and retries as pushes.
public struct BroadcastChannelClient: Sendable {
    let pool: APNsConnectionPool
    let bundleID: String
    let requestID: @Sendable () -> String

    public init(
        pool: APNsConnectionPool, bundleID: String,
        requestID: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }
    ) {
        self.pool = pool
        self.bundleID = bundleID
        self.requestID = requestID
    }

    /// Creates a Live Activity channel and returns its id (`apns-channel-id`).
    public func create(storagePolicy: ChannelStoragePolicy) async throws(BroadcastChannelError) -> String {
        let answer = try await exchange(.create(storagePolicy), expecting: 201)
        guard let channelID = answer.headers["apns-channel-id"], !channelID.isEmpty else {
            throw BroadcastChannelError(
                status: answer.status, reason: nil,
                message: "APNs created a channel but sent no apns-channel-id header", isRetryable: false)
        }
        return channelID
    }

    /// The policy and push type of a channel.
    public func read(channelID: String) async throws(BroadcastChannelError) -> BroadcastChannelInfo {
        let answer = try await exchange(.read(channelID: channelID), expecting: 200)
        guard let object = (try? JSONValue.parse(answer.body))?.objectValue,
            let rawPolicy = object["message-storage-policy"]?.integerValue,
            let policy = ChannelStoragePolicy(rawValue: Int(clamping: rawPolicy))
        else {
            throw BroadcastChannelError(
                status: answer.status, reason: nil,
                message: "APNs answered channel \(channelID) without a message-storage-policy of 0 or 1",
                isRetryable: false)
        }
        return BroadcastChannelInfo(
            channelID: channelID, storagePolicy: policy, pushType: object["push-type"]?.stringValue ?? "LiveActivity")
    }

    /// Deletes a channel; its subscribers get no more broadcasts.
    public func delete(channelID: String) async throws(BroadcastChannelError) {
        _ = try await exchange(.delete(channelID: channelID), expecting: 204)
    }

    /// Every channel id of the app in this environment.
    public func list() async throws(BroadcastChannelError) -> [String] {
        let answer = try await exchange(.list, expecting: 200)
        guard let items = (try? JSONValue.parse(answer.body))?["channels"]?.arrayValue else {
            throw BroadcastChannelError(
                status: answer.status, reason: nil, message: "APNs answered the channel list without a channels array",
                isRetryable: false)
        }
        var channels: [String] = []
        for item in items {
            guard let channelID = item.stringValue else {
                throw BroadcastChannelError(
                    status: answer.status, reason: nil, message: "APNs listed a channel id that is not a string: \(item)",
                    isRetryable: false)
            }
            channels.append(channelID)
        }
        return channels
    }

    /// Sends `operation`; any status other than `expected` (or 200, which
    /// some answers use instead of 201/204) is an error naming it.
    private func exchange(_ operation: ChannelOperation, expecting expected: Int) async throws(BroadcastChannelError)
        -> APNsExchange
    {
        let request = APNsRequest(channelOperation: operation, bundleID: bundleID, requestID: requestID())
        let answer = await pool.exchange(request)
        let what = "\(operation.method) \(operation.path(bundleID: bundleID))"
        guard let status = answer.status else {
            throw BroadcastChannelError(
                status: nil, reason: nil, message: "\(what) got no answer: \(Self.describe(answer.outcome))",
                isRetryable: true)
        }
        guard status == expected || status == 200 else {
            let reason = (try? JSONValue.parse(answer.body))?["reason"]?.stringValue
            let retryable = status == 429 || status >= 500
            throw BroadcastChannelError(
                status: status, reason: reason,
                message: "\(what) was refused: \(status) \(reason ?? "without a reason")" + Self.advice(status, reason),
                isRetryable: retryable)
        }
        return answer
    }

    private static func describe(_ outcome: APNsOutcome) -> String {
        switch outcome {
        case .retryable(let failure): failure.error.message
        case .misconfigured(let error): error.message
        case .delivered, .tokenInvalid, .permanent: outcome.label
        }
    }

    private static func advice(_ status: Int, _ reason: String?) -> String {
        switch (status, reason) {
        case (404, _), (_, "ChannelNotRegistered"): "; the channel does not exist (deleted, or of the other environment)"
        case (_, "CannotCreateChannelConfig"), (429, _): "; the app has too many channels in this environment, delete some"
        case (403, _): "; check the key id, team id, .p8 key and that broadcast is enabled for the app"
        case (500...599, _): "; retry later"
        default: ""
        }
    }
}
