import LiveDispatchCore

/// The provider token a connection last accepted: APNs binds it to the
/// connection and refuses a different one within 20 minutes.
struct ConnectionTokenState: Sendable, Hashable {
    /// The last token accepted, verbatim, so an identical one skips the signature check.
    var token: String?
    var issuedAt: Int64 = 0
    /// When (server time, Unix seconds) the connection switched to `token`.
    var acceptedAt: Int64 = 0
    /// Which of the accepted keys signed `token`.
    var key = 0
    /// The bundle id of the connection's first accepted push: APNs binds
    /// a connection's team and bundle by it.
    var boundBundle: String?
}

/// What APNs checks on `POST /3/device/<token>`, in the order it checks:
/// method and path, device token, provider token, headers, payload. Pure:
/// the time and the generated `apns-id` are passed in.
struct APNsRequestRules: Sendable {
    /// Push types APNs knows.
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    /// Largest payload APNs accepts for a device push.
    static let maxPayloadBytes = 4096

    /// The keys accepted (team id, key id, public key) and the bundle ids
    /// each may push for: the first is the configuration's own app.
    let keys: [(verifier: ProviderTokenVerifier, bundleIDs: Set<String>)]
    /// A connection may change provider token at most this often (seconds);
    /// nil turns the rule off.
    let tokenUpdateInterval: Int64?

    /// `others` are further apps the simulator accepts, each with its own
    /// key or sharing one (then the key may push for both bundles).
    init(bundleID: String, verifier: ProviderTokenVerifier, tokenUpdateInterval: Int64?, others: [(bundleID: String, verifier: ProviderTokenVerifier)] = []) {
        var keys: [(verifier: ProviderTokenVerifier, bundleIDs: Set<String>)] = [(verifier, [bundleID])]
        for other in others {
            if let index = keys.firstIndex(where: { $0.verifier.keyID == other.verifier.keyID && $0.verifier.teamID == other.verifier.teamID }) {
                keys[index].bundleIDs.insert(other.bundleID)
            } else {
                keys.append((other.verifier, [other.bundleID]))
            }
        }
        self.keys = keys
        self.tokenUpdateInterval = tokenUpdateInterval
    }

    static let liveActivitySuffix = ".push-type.liveactivity"

    /// The bundle ids the key of a connection's accepted token may push for.
    func bundles(of tokenState: ConnectionTokenState) -> Set<String> {
        keys[min(tokenState.key, keys.count - 1)].bundleIDs
    }

    /// The headers the rules read, gathered in one pass.
    struct Headers {
        var method: String?
        var path: String?
        var authorization: String?
        var pushType: String?
        var topic: String?
        var priority: String?
        var expiration: String?
        var apnsID: String?
        var collapseID: String?
        var channelID: String?
        var requestID: String?
        var hasDuplicates = false

        /// Reads the fields the rules need; the others stay bytes.
        init(_ block: HeaderBlock) {
            func set(_ slot: inout String?, _ index: Int) {
                if slot != nil { hasDuplicates = true }
                slot = block.value(at: index)
            }
            for index in 0..<block.count {
                if block.name(at: index, is: ":method") {
                    method = block.value(at: index)
                } else if block.name(at: index, is: ":path") {
                    path = block.value(at: index)
                } else if block.name(at: index, is: "authorization") {
                    set(&authorization, index)
                } else if block.name(at: index, is: "apns-push-type") {
                    set(&pushType, index)
                } else if block.name(at: index, is: "apns-topic") {
                    set(&topic, index)
                } else if block.name(at: index, is: "apns-priority") {
                    set(&priority, index)
                } else if block.name(at: index, is: "apns-expiration") {
                    set(&expiration, index)
                } else if block.name(at: index, is: "apns-id") {
                    set(&apnsID, index)
                } else if block.name(at: index, is: "apns-collapse-id") {
                    set(&collapseID, index)
                } else if block.name(at: index, is: "apns-channel-id") {
                    set(&channelID, index)
                } else if block.name(at: index, is: "apns-request-id") {
                    set(&requestID, index)
                }
            }
        }
    }

    /// The outcome of a request: the response, the device token it named and the `apns-id`.
    struct Verdict: Sendable {
        var response: SimulatedResponse
        var deviceToken: String?
        var apnsID: String
        /// The channel an accepted broadcast went to.
        var channelID: String? = nil
        /// The decoded `aps.event`, when the payload was accepted.
        var event: String?
        var isAccepted: Bool { response.status == 200 }
    }

    func evaluate(
        _ request: ReceivedRequest, tokenState: inout ConnectionTokenState, now: Int64, generatedID: () -> String
    ) -> Verdict {
        let headers = Headers(request.headers)
        let requestedID = headers.apnsID
        let apnsID = requestedID.flatMap { Self.isUUID($0) ? $0.lowercased() : nil } ?? generatedID()
        func refuse(_ status: Int, _ reason: String, token: String? = nil) -> Verdict {
            Verdict(response: SimulatedResponse(status: status, reason: reason), deviceToken: token, apnsID: apnsID)
        }

        if headers.hasDuplicates { return refuse(400, "DuplicateHeaders") }
        let method = headers.method ?? ""
        let path = headers.path ?? ""
        let devicePrefix = "/3/device/"
        guard path.hasPrefix(devicePrefix) else { return refuse(404, "BadPath") }
        guard method == "POST" else { return refuse(405, "MethodNotAllowed") }
        let tokenText = String(path.dropFirst(devicePrefix.count))
        guard !tokenText.isEmpty else { return refuse(400, "MissingDeviceToken") }
        guard let token = try? DeviceToken(hex: tokenText) else {
            return refuse(400, "BadDeviceToken")
        }
        let hex = token.hex
        if let requestedID, !Self.isUUID(requestedID) { return refuse(400, "BadMessageId", token: hex) }

        if let reason = checkProviderToken(headers.authorization, state: &tokenState, now: now) {
            let status = reason == "TooManyProviderTokenUpdates" ? 429 : 403
            return refuse(status, reason, token: hex)
        }

        let pushType = headers.pushType ?? "alert"
        guard Self.pushTypes.contains(pushType) else { return refuse(400, "InvalidPushType", token: hex) }
        guard let topic = headers.topic, !topic.isEmpty else { return refuse(400, "MissingTopic", token: hex) }
        // The bundle is the key's bundle the topic starts with; a
        // connection stays with the bundle of its first push.
        guard let bundleID = bundles(of: tokenState).first(where: { topic == $0 || topic.hasPrefix($0 + ".") }) else {
            return refuse(400, "DeviceTokenNotForTopic", token: hex)
        }
        if let bound = tokenState.boundBundle, bound != bundleID { return refuse(400, "TopicDisallowed", token: hex) }
        let bundlePrefix = bundleID + "."
        if pushType == "liveactivity" {
            if topic != bundleID + Self.liveActivitySuffix {
                return refuse(400, topic == bundleID || topic.hasPrefix(bundlePrefix) ? "BadTopic" : "DeviceTokenNotForTopic", token: hex)
            }
        } else {
            guard topic == bundleID || topic.hasPrefix(bundlePrefix) else {
                return refuse(400, "DeviceTokenNotForTopic", token: hex)
            }
            if topic.hasSuffix(Self.liveActivitySuffix) { return refuse(400, "InvalidPushType", token: hex) }
        }
        if let priority = headers.priority, priority != "10", priority != "5", priority != "1" {
            return refuse(400, "BadPriority", token: hex)
        }
        if let expiration = headers.expiration, Int64(expiration).map({ $0 >= 0 }) != true {
            return refuse(400, "BadExpirationDate", token: hex)
        }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 {
            return refuse(400, "BadCollapseId", token: hex)
        }

        guard request.bodySize > 0 else { return refuse(400, "PayloadEmpty", token: hex) }
        guard request.bodySize <= Self.maxPayloadBytes else { return refuse(413, "PayloadTooLarge", token: hex) }
        guard let payload = PayloadScanner.facts(of: request.body), payload.apsIsObject else {
            return refuse(400, "BadPayload", token: hex)
        }
        var event: String?
        if pushType == "liveactivity" {
            guard let name = payload.event, name == "update" || name == "end" || name == "start",
                payload.hasNumericTimestamp
            else { return refuse(400, "BadPayload", token: hex) }
            if name == "start", !Self.isValidStart(request.body) { return refuse(400, "BadPayload", token: hex) }
            event = name
        }
        tokenState.boundBundle = bundleID
        return Verdict(response: .success, deviceToken: hex, apnsID: apnsID, event: event)
    }

    /// Nil when the token is acceptable; the APNs reason otherwise.
    func checkProviderToken(_ authorization: String?, state: inout ConnectionTokenState, now: Int64)
        -> String?
    {
        if let authorization, let known = state.token, authorization == known {
            return now - state.issuedAt > ProviderTokenVerifier.lifetime ? "ExpiredProviderToken" : nil
        }
        // The key whose id the token names decides; with none, the first.
        let outcomes = keys.map { $0.verifier.verify(authorization: authorization, now: now) }
        let chosen = outcomes.firstIndex { if case .valid = $0 { true } else { false } }
            ?? outcomes.firstIndex { if case .expired = $0 { true } else { false } } ?? 0
        let outcome = outcomes[chosen]
        switch outcome {
        case .valid(let issuedAt):
            // A connection keeps the key of its first token.
            if state.token != nil, state.key != chosen { return "UnrelatedKeyIdInToken" }
            if let interval = tokenUpdateInterval, state.token != nil,
                now - state.issuedAt <= ProviderTokenVerifier.lifetime, now - state.acceptedAt < interval
            {
                return "TooManyProviderTokenUpdates"
            }
            state = ConnectionTokenState(token: authorization, issuedAt: issuedAt, acceptedAt: now, key: chosen, boundBundle: state.boundBundle)
            return nil
        case .missing, .invalid, .expired:
            return outcome.reason
        }
    }

    /// A start (push-to-start, iOS 17.2+) needs what the device builds the
    /// activity from: `content-state`, `attributes-type`, `attributes` and an
    /// `alert`; `input-push-token`, when present, is 1. Starts are rare, so
    /// the payload is parsed whole.
    static func isValidStart(_ body: [UInt8]) -> Bool {
        guard let aps = (try? JSONValue.parse(body))?["aps"]?.objectValue,
              aps["content-state"]?.objectValue != nil,
              let attributesType = aps["attributes-type"]?.stringValue, !attributesType.isEmpty,
              aps["attributes"]?.objectValue != nil,
              let alert = aps["alert"]
        else { return false }
        let alertReadable = alert.stringValue != nil || alert.objectValue.map { $0["title"] != nil || $0["body"] != nil } == true
        guard alertReadable else { return false }
        if let input = aps["input-push-token"], input.integerValue != 1 { return false }
        return true
    }

    /// `8-4-4-4-12` hex digits.
    static func isUUID(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let isHex = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
                guard isHex else { return false }
            }
        }
        return true
    }
}
