import LiveDispatchCore

/// What APNs checks on the broadcast APIs (iOS 18): channel management
/// (`/1/apps/<bundle>/channels`, `/1/apps/<bundle>/all-channels`) and the
/// broadcast send (`POST /4/broadcasts/apps/<bundle>`). Both are served on
/// the simulator's one listener, told apart by path. Pure but for the
/// registry handed in, which the caller keeps under its lock.
extension APNsRequestRules {
    static let managementPrefix = "/1/apps/"
    static let broadcastPrefix = "/4/broadcasts/apps/"
    /// Largest payload APNs accepts for a broadcast.
    static let maxBroadcastPayloadBytes = 5120

    /// Whether `request` goes to the broadcast APIs rather than to a device.
    static func isChannelRequest(_ request: ReceivedRequest) -> Bool {
        for index in 0..<request.headers.count where request.headers.name(at: index, is: ":path") {
            let path = request.headers.value(at: index)
            return path.hasPrefix(managementPrefix) || path.hasPrefix(broadcastPrefix)
        }
        return false
    }

    func evaluateChannelRequest(
        _ request: ReceivedRequest, tokenState: inout ConnectionTokenState, channels: inout ChannelRegistry,
        now: Int64, generatedID: () -> String, newChannelID: () -> String
    ) -> Verdict {
        let headers = Headers(request.headers)
        let path = headers.path ?? ""
        let isBroadcast = path.hasPrefix(Self.broadcastPrefix)
        // Management echoes `apns-request-id`, a broadcast `apns-id`.
        let requested = isBroadcast ? headers.apnsID : headers.requestID
        let requestID = requested.flatMap { Self.isUUID($0) ? $0.lowercased() : nil } ?? generatedID()
        let idHeader = isBroadcast ? "apns-id" : "apns-request-id"
        func answer(_ status: Int, _ reason: String? = nil, headers extra: [HeaderField] = [], content: JSONValue? = nil)
            -> Verdict
        {
            let fields = isBroadcast ? extra : [HeaderField(name: idHeader, value: requestID)] + extra
            return Verdict(
                response: SimulatedResponse(status: status, reason: reason, headers: fields, content: content),
                apnsID: requestID)
        }

        if headers.hasDuplicates { return answer(400, "DuplicateHeaders") }
        if let requested, !Self.isUUID(requested) { return answer(400, isBroadcast ? "BadMessageId" : "BadRequestId") }
        let method = headers.method ?? ""
        let rest = path.dropFirst(isBroadcast ? Self.broadcastPrefix.count : Self.managementPrefix.count)
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        let bundle = parts.first.map(String.init) ?? ""
        let resource = isBroadcast ? (parts.count == 1 ? "" : nil) : (parts.count == 2 ? String(parts[1]) : nil)
        guard let resource, resource.isEmpty || resource == "channels" || resource == "all-channels" else {
            return answer(404, "BadPath")
        }
        let allowed: Set<String> =
            switch resource {
            case "channels": ["POST", "GET", "DELETE"]
            case "all-channels": ["GET"]
            default: ["POST"]
            }
        guard allowed.contains(method) else { return answer(405, "MethodNotAllowed") }
        if let reason = checkProviderToken(headers.authorization, state: &tokenState, now: now) {
            return answer(reason == "TooManyProviderTokenUpdates" ? 429 : 403, reason)
        }
        guard bundles(of: tokenState).contains(bundle) else { return answer(400, "BadTopic") }

        if isBroadcast {
            return broadcast(
                request, headers: headers, channels: channels, apnsID: requestID,
                answer: { answer($0, $1, headers: $2, content: $3) })
        }
        switch (resource, method) {
        case ("all-channels", _):
            return answer(200, content: .object(["channels": .array(channels.channelIDs.map { .string($0) })]))
        case (_, "POST"):
            guard let object = (try? JSONValue.parse(request.body))?.objectValue else { return answer(400, "BadPayload") }
            guard let pushType = object["push-type"] else { return answer(400, "MissingPushType") }
            guard pushType.stringValue == "LiveActivity" else { return answer(400, "InvalidPushType") }
            guard let raw = object["message-storage-policy"]?.integerValue,
                let policy = ChannelStoragePolicy(rawValue: Int(clamping: raw))
            else { return answer(400, "BadMessageStoragePolicy") }
            let channelID = newChannelID()
            guard channels.create(channelID, policy: policy) else { return answer(400, "CannotCreateChannelConfig") }
            return answer(201, headers: [HeaderField(name: "apns-channel-id", value: channelID)])
        default:
            guard let channelID = headers.channelID else { return answer(400, "MissingChannelId") }
            guard ChannelRegistry.isChannelID(channelID) else { return answer(400, "BadChannelId") }
            guard let policy = channels.policy(of: channelID) else { return answer(404, "ChannelNotRegistered") }
            let echo = [HeaderField(name: "apns-channel-id", value: channelID)]
            if method == "DELETE" {
                _ = channels.delete(channelID)
                return answer(204, headers: echo)
            }
            return answer(
                200, headers: echo,
                content: .object([
                    "message-storage-policy": .integer(Int64(policy.rawValue)), "push-type": .string("LiveActivity"),
                ]))
        }
    }

    /// `POST /4/broadcasts/apps/<bundle>`: a Live Activity update or end to
    /// an existing channel; no topic needed; `apns-expiration` 0 on a
    /// channel that stores nothing.
    private func broadcast(
        _ request: ReceivedRequest, headers: Headers, channels: ChannelRegistry, apnsID: String,
        answer: (Int, String?, [HeaderField], JSONValue?) -> Verdict
    ) -> Verdict {
        func refuse(_ status: Int, _ reason: String) -> Verdict { answer(status, reason, [], nil) }
        guard let channelID = headers.channelID else { return refuse(400, "MissingChannelId") }
        guard ChannelRegistry.isChannelID(channelID) else { return refuse(400, "BadChannelId") }
        guard let policy = channels.policy(of: channelID) else { return refuse(404, "ChannelNotRegistered") }
        guard let pushType = headers.pushType else { return refuse(400, "MissingPushType") }
        guard pushType == "liveactivity" else { return refuse(400, "InvalidPushType") }
        if let priority = headers.priority, priority != "10", priority != "5", priority != "1" {
            return refuse(400, "BadPriority")
        }
        if let expiration = headers.expiration {
            guard let seconds = Int64(expiration), seconds >= 0 else { return refuse(400, "BadExpirationDate") }
            if policy == .noStorage && seconds != 0 { return refuse(400, "BadExpirationDate") }
        }
        guard request.bodySize > 0 else { return refuse(400, "PayloadEmpty") }
        guard request.bodySize <= Self.maxBroadcastPayloadBytes else { return refuse(413, "PayloadTooLarge") }
        guard let payload = PayloadScanner.facts(of: request.body), payload.apsIsObject,
            let event = payload.event, event == "update" || event == "end", payload.hasNumericTimestamp
        else { return refuse(400, "BadPayload") }
        var verdict = Verdict(response: .success, apnsID: apnsID, event: event)
        verdict.channelID = channelID
        return verdict
    }
}
