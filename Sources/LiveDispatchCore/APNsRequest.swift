/// One request to APNs, everything but the `authorization` header (which
/// the connection adds with its current JWT): the contract between whoever
/// builds a push and the HTTP/2 client that sends it.
public struct APNsRequest: Sendable, Hashable {
    /// Who receives the push.
    public enum Destination: Sendable, Hashable {
        /// One device: `POST /3/device/<hex token>`.
        case device(DeviceToken)
        /// Every device subscribed to a broadcast channel (iOS 18):
        /// `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`.
        case channel(String)
        /// The broadcast channel management API of the app (on
        /// `api-manage-broadcast`, not the push host): no push type, topic,
        /// priority or expiration; `apnsID` goes as `apns-request-id`.
        case channelManagement(ChannelOperation)
    }

    public var destination: Destination
    /// The app's bundle id; the topic is derived from it and the push type.
    public var bundleID: String
    /// `apns-push-type`; `liveactivity` for everything LiveDispatch sends.
    public var pushType: String
    public var priority: PushPriority
    /// `apns-expiration`: until when APNs should keep trying; nil sends 0
    /// (deliver now or never).
    public var expiration: UnixTime?
    /// `apns-id`: a lowercase UUID, echoed in the response.
    public var apnsID: String
    public var payload: [UInt8]

    public init(
        destination: Destination, bundleID: String, pushType: String = "liveactivity", priority: PushPriority,
        expiration: UnixTime?, apnsID: String, payload: [UInt8]
    ) {
        self.destination = destination
        self.bundleID = bundleID
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.payload = payload
    }

    /// `apns-topic`: `<bundle>.push-type.liveactivity` for Live Activities,
    /// the bundle id otherwise.
    public var topic: String {
        pushType == "liveactivity" ? "\(bundleID).push-type.liveactivity" : bundleID
    }

    /// The `:method` pseudo-header: POST for pushes.
    public var method: String {
        switch destination {
        case .device, .channel: "POST"
        case .channelManagement(let operation): operation.method
        }
    }

    /// The `:path` pseudo-header.
    public var path: String {
        switch destination {
        case .device(let token): "/3/device/\(token.hex)"
        case .channel: "/4/broadcasts/apps/\(bundleID)"
        case .channelManagement(let operation): operation.path(bundleID: bundleID)
        }
    }

    /// Request headers in the order they are sent, pseudo-headers first,
    /// without `:authority` (the connection's host) and `authorization`.
    /// A broadcast carries `apns-channel-id` and no `apns-topic`.
    public var headers: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [(":method", method), (":scheme", "https"), (":path", path)]
        switch destination {
        case .device:
            headers.append(("apns-push-type", pushType))
            headers.append(("apns-topic", topic))
        case .channel(let channelID):
            headers.append(("apns-push-type", pushType))
            headers.append(("apns-channel-id", channelID))
        case .channelManagement(let operation):
            if let channelID = operation.channelID { headers.append(("apns-channel-id", channelID)) }
            headers.append(("apns-request-id", apnsID))
            if !payload.isEmpty {
                headers.append(("content-type", "application/json"))
                headers.append(("content-length", String(payload.count)))
            }
            return headers
        }
        headers.append(("apns-priority", priority.description))
        headers.append(("apns-expiration", String(expiration?.wholeSeconds ?? 0)))
        headers.append(("apns-id", apnsID))
        headers.append(("content-type", "application/json"))
        headers.append(("content-length", String(payload.count)))
        return headers
    }
}

extension APNsRequest {
    /// A channel management request of the app `bundleID`; its body is the operation's.
    public init(channelOperation operation: ChannelOperation, bundleID: String, requestID: String) {
        self.init(
            destination: .channelManagement(operation), bundleID: bundleID, priority: .immediate, expiration: nil,
            apnsID: requestID, payload: operation.body)
    }

    /// How long APNs keeps trying an update whose command set no stale date:
    /// iOS accepts updates for eight hours of an activity's life.
    public static let defaultUpdateLifetime: Double = 8 * 3600

    /// How long an ended activity stays on the Lock Screen without a
    /// dismissal date: iOS keeps it up to four hours.
    public static let defaultEndLifetime: Double = 4 * 3600

    /// The shortest time APNs is asked to keep a push for an offline
    /// device, counted from when it is sent: a push sent late (a retry, a
    /// device registered after the version was made) is never already
    /// expired, whatever its dates say.
    public static let minimumLifetime: Double = 3600

    /// The request that delivers `push` (already encoded as `payload`),
    /// sent at `now`. APNs keeps only the newest push per device, so a late
    /// delivery still carries the latest state.
    public init(
        push: LiveActivityPush, payload: [UInt8], to destination: Destination, bundleID: String, apnsID: String, now: UnixTime
    ) {
        self.init(
            destination: destination, bundleID: bundleID, priority: push.priority,
            expiration: Self.expiration(of: push, sentAt: now), apnsID: apnsID, payload: payload)
    }

    /// `apns-expiration` for `push` sent at `now`, computed at each send.
    /// An update expires at its stale date when it has one (after it the
    /// content is stale anyway), else its event time plus
    /// ``defaultUpdateLifetime``. An end is kept at least until its
    /// dismissal date and at least ``defaultEndLifetime`` after its event
    /// time, so a device offline for a while still ends the activity instead
    /// of showing it live until iOS gives up on it. When that has passed by
    /// `now`, it is ``minimumLifetime`` after `now`: a stale date that has
    /// passed makes the content stale on the device, not the push
    /// undeliverable.
    public static func expiration(of push: LiveActivityPush, sentAt now: UnixTime) -> UnixTime {
        let dated: UnixTime
        switch push.event {
        case .start, .update:
            dated = push.staleDate ?? push.timestamp + defaultUpdateLifetime
        case .end:
            let retained = push.timestamp + defaultEndLifetime
            dated = push.dismissalDate.map { max($0, retained) } ?? retained
        }
        return dated > now ? dated : now + minimumLifetime
    }
}
