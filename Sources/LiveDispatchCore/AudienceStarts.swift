/// Push-to-start, on the audience's side: the partition holding an audience
/// keeps its push-to-start tokens and their start ledgers, and sends them
/// the audience starts that the partitions owning the activities write to
/// `starts`.
///
/// An audience start goes to every push-to-start token of its attributes
/// type (and app) in the audience that ``PushToStartBudget`` admits. Each
/// admitted start is first recorded in the token's ledger in `token-store`;
/// only once Kafka has it is the start sent, through a ``FanOut`` of the
/// audience start's own (retries, 410 pruning, dead letters), so a restart
/// or a re-delivery never sends a token a second start of one activity (a
/// crash between the two loses that start instead). The audience start is
/// done when every token was sent its start (or was pruned, or
/// dead-lettered) and every write it made is acknowledged.
struct AudienceStarts: Sendable {
    typealias Action = PartitionDispatcher.Action
    typealias RegisteredToken = PartitionDispatcher.RegisteredToken

    /// What the machine keeps of a push-to-start registration.
    struct PushToStartToken: Sendable, Hashable {
        var attributesType: String
        var registered: RegisteredToken
        var device: String?

        init(_ registration: PushToStartRegistration) {
            attributesType = registration.attributesType
            registered = RegisteredToken(
                environment: registration.environment, expiresAt: registration.expiresAt, registeredAt: registration.registeredAt,
                app: registration.app)
            device = registration.device
        }

        func registration(_ audience: AudienceKey, _ token: DeviceToken) -> PushToStartRegistration {
            PushToStartRegistration(
                audience: audience, attributesType: attributesType, token: token, environment: registered.environment,
                expiresAt: registered.expiresAt, registeredAt: registered.registeredAt, app: registered.app, device: device)
        }

        /// Whether `other` is a token of the same device for the same app
        /// and attributes type (and so replaces this one).
        func sameDevice(as other: PushToStartToken) -> Bool {
            device != nil && device == other.device && attributesType == other.attributesType && registered.app == other.registered.app
        }
    }

    /// One audience start in progress.
    struct Delivery: Sendable {
        var start: AudienceStart
        var fanOut: FanOut
        /// Where each admitted token is sent.
        var destinations: [DeviceToken: RegisteredToken] = [:]
        /// Ledgers written and not yet acknowledged.
        var recording = 0
        /// Dead letters and tombstones not yet acknowledged.
        var pendingAcks = 0
        var alreadyStarted = 0
        var delivered: [DeviceToken] = []
        var payloads = PayloadCache()
    }

    /// Push-to-start tokens by audience, then token.
    private(set) var audiences: [AudienceKey: [DeviceToken: PushToStartToken]] = [:]
    private(set) var budget: PushToStartBudget
    /// Audience starts being sent, by their offset on `starts`.
    private var deliveries: [Int64: Delivery] = [:]

    init(budget: PushToStartBudget.Configuration) {
        self.budget = PushToStartBudget(configuration: budget)
    }

    /// Whether no audience start is in progress.
    var isIdle: Bool { deliveries.isEmpty }

    /// The push-to-start tokens of `audience`, sorted.
    func tokens(of audience: AudienceKey) -> [DeviceToken] {
        audiences[audience].map { $0.keys.sorted() } ?? []
    }

    /// What `token-store` keeps of a push-to-start token: its registration
    /// and, under `started`, the starts it was sent.
    static func storedValue(_ registration: PushToStartRegistration, ledger: PushToStartBudget.Ledger) -> [UInt8] {
        guard case .object(var fields) = registration.json else { return registration.json.serialized() }
        if !ledger.starts.isEmpty { fields["started"] = ledger.json }
        return JSONValue.object(fields).serialized()
    }

    // MARK: Registrations

    /// A push-to-start registration (key: audience U+001E token) read back
    /// from `token-store`, with its ledger; a tombstone removes it.
    mutating func restore(key: String, value: [UInt8]?, apps: AppDirectory) {
        guard let value else {
            let parts = key.split(separator: "\u{1E}", maxSplits: 1)
            if parts.count == 2, let audience = try? AudienceKey(String(parts[0])), let token = try? DeviceToken(hex: String(parts[1])) {
                remove(audience, token)
            }
            return
        }
        guard case .object(var fields)? = try? JSONValue.parse(value) else { return }
        let started = fields.removeValue(forKey: "started")
        guard var registration = try? PushToStartRegistration(json: .object(fields)), registration.action == .register else { return }
        registration.app = apps.restored(registration.app)
        let restored = PushToStartToken(registration)
        // A replaced token whose tombstone was not written: the newer
        // registration of the device wins.
        let previous = audiences[registration.audience]?.first { $0.key != registration.token && $0.value.sameDevice(as: restored) }
        if let previous {
            let earliest = UnixTime(seconds: 0)
            guard (previous.value.registered.registeredAt ?? earliest) <= (registration.registeredAt ?? earliest) else { return }
            remove(registration.audience, previous.key)
        }
        audiences[registration.audience, default: [:]][registration.token] = restored
        if let started { budget.restore(registration.token, PushToStartBudget.Ledger(json: started)) }
    }

    /// A push-to-start registration read from `tokens`: the value its
    /// `token-store` record takes (nil for a tombstone), and the tokens of
    /// the same device it replaces in the audience, whose records are
    /// removed.
    mutating func apply(_ registration: PushToStartRegistration, now: UnixTime) -> (value: [UInt8]?, replaced: [DeviceToken]) {
        var registration = registration
        switch registration.action {
        case .register where !registration.isExpired(at: now):
            registration.registeredAt = registration.registeredAt ?? now
            let token = PushToStartToken(registration)
            let replaced = (audiences[registration.audience] ?? [:])
                .filter { $0.key != registration.token && $0.value.sameDevice(as: token) }.keys.sorted()
            for old in replaced { remove(registration.audience, old) }
            audiences[registration.audience, default: [:]][registration.token] = token
            return (Self.storedValue(registration, ledger: budget.ledger(of: registration.token)), replaced)
        case .register, .unregister:
            remove(registration.audience, registration.token)
            return (nil, [])
        }
    }

    /// Forgets a push-to-start token in `audience`, and its ledger when no
    /// other audience of this partition holds it.
    private mutating func remove(_ audience: AudienceKey, _ token: DeviceToken) {
        audiences[audience]?.removeValue(forKey: token)
        if audiences[audience]?.isEmpty == true { audiences.removeValue(forKey: audience) }
        if !audiences.values.contains(where: { $0[token] != nil }) { budget.forget(token) }
    }

    /// Forgets the push-to-start tokens past their `expires_at`: the keys
    /// of their `token-store` records.
    mutating func sweep(now: UnixTime) -> [String] {
        var expired: [String] = []
        for (audience, tokens) in audiences {
            for (token, registration) in tokens where registration.registered.isExpired(at: now) {
                remove(audience, token)
                expired.append(PushToStartRegistration.storeKey(audience, token))
            }
        }
        return expired
    }

    // MARK: Audience starts

    /// Admits the tokens of the audience start at `offset` and writes each
    /// admitted token's ledger; `fanOut` sends the starts once the ledgers
    /// are stored (``recorded(_:_:now:)``).
    mutating func begin(
        _ start: AudienceStart, offset: Int64, fanOut: FanOut, now: UnixTime, writes: inout PartitionWrites
    ) -> [Action] {
        let activity = start.push.activityID
        var delivery = Delivery(start: start, fanOut: fanOut)
        _ = delivery.fanOut.publish(start.push, now: now)
        var actions: [Action] = []
        let tokens = audiences[start.audience] ?? [:]
        for token in tokens.keys.sorted() {
            // An activity of one app is started only on that app's devices.
            guard let registration = tokens[token], registration.attributesType == start.push.attributesType,
                  start.app == nil || registration.registered.app == start.app, !registration.registered.isExpired(at: now)
            else { continue }
            switch budget.admit(token, activity: activity, now: now) {
            case .start:
                delivery.destinations[token] = registration.registered
                delivery.recording += 1
                let value = Self.storedValue(registration.registration(start.audience, token), ledger: budget.ledger(of: token))
                actions.append(writes.produce(
                    .tokenStore, key: PushToStartRegistration.storeKey(start.audience, token), value: value,
                    then: .startRecorded(offset, token)))
            case .alreadyStarted:
                delivery.alreadyStarted += 1
            case .rateLimited(let count, let limit, let nextAllowedAt):
                let letter = DeadLetter(
                    reason: .startRateLimited,
                    message: "start of activity \(activity) to push-to-start token \(token.hex) in audience \(start.audience) is not sent: the token was sent \(count) starts in the past hour (limit \(limit), push_to_start.max_starts_per_hour)",
                    activityID: activity, token: token,
                    details: ["audience": .string(start.audience.rawValue), "limit": .integer(Int64(limit)), "next_allowed_at": .double(nextAllowedAt.seconds)],
                    deadLetteredAt: now)
                delivery.pendingAcks += 1
                actions += writes.deadLetter(letter, key: start.audience.rawValue, then: .awaitedBy(.audienceStart(offset)))
            }
        }
        deliveries[offset] = delivery
        return actions
    }

    /// A token's ledger is stored: its start may be sent.
    mutating func recorded(_ offset: Int64, _ token: DeviceToken, now: UnixTime) -> [FanOut.Action]? {
        deliveries[offset]?.recording -= 1
        return deliveries[offset]?.fanOut.addToken(token, sendCurrent: true, now: now)
    }

    /// Runs `body` on the fan-out of the audience start at `offset`; nil when there is none.
    mutating func withFanOut<Result>(_ offset: Int64, _ body: (inout FanOut) -> Result) -> Result? {
        deliveries[offset]?.withFanOut(body)
    }

    /// A start the fan-out settled: a delivered one is reported when the audience start is done.
    mutating func settled(_ offset: Int64, _ token: DeviceToken, _ settlement: FanOut.Settlement) {
        if settlement == .delivered { deliveries[offset]?.delivered.append(token) }
    }

    // MARK: Performing the fan-out's actions

    /// The send of `push` to an admitted token, its payload encoded once.
    mutating func plan(
        _ offset: Int64, _ token: DeviceToken, _ push: LiveActivityPush, defaultEnvironment: APNsEnvironment
    ) -> PartitionDispatcher.SendPlan? {
        guard let payload = deliveries[offset]?.payloads.payload(for: push) else { return nil }
        switch payload {
        case .success(let bytes):
            let destination = deliveries[offset]?.destinations[token]
            return .send(PartitionDispatcher.Send(
                activityID: push.activityID, token: token, environment: destination?.environment ?? defaultEnvironment,
                app: destination?.app, push: push, payload: bytes, audienceStart: offset))
        case .failure(let error):
            return .settle(.permanent(reason: error.description))
        }
    }

    /// APNs reports the token gone: it is forgotten and tombstoned.
    mutating func removeToken(
        _ offset: Int64, _ token: DeviceToken, reason: String, writes: inout PartitionWrites
    ) -> [Action] {
        guard let start = deliveries[offset]?.start else { return [] }
        remove(start.audience, token)
        deliveries[offset]?.pendingAcks += 1
        return [
            .observe(.tokenRemoved(start.push.activityID, token, reason: reason)),
            writes.produce(
                .tokenStore, key: PushToStartRegistration.storeKey(start.audience, token), value: nil,
                then: .awaitedBy(.audienceStart(offset))),
        ]
    }

    /// The start to a token failed for good: dead-lettered.
    mutating func deadLetter(
        _ offset: Int64, _ failure: PartitionDispatcher.SendFailure, now: UnixTime, writes: inout PartitionWrites
    ) -> [Action] {
        guard let start = deliveries[offset]?.start else { return [] }
        let activity = start.push.activityID
        var details = failure.details
        details["audience"] = .string(start.audience.rawValue)
        let letter = DeadLetter(
            reason: failure.reason,
            message: "start of activity \(activity) to push-to-start token \(failure.token.hex) in audience \(start.audience) failed: \(failure.detail)",
            activityID: activity, token: failure.token, details: details, deadLetteredAt: now)
        deliveries[offset]?.pendingAcks += 1
        return writes.deadLetter(letter, key: start.audience.rawValue, then: .awaitedBy(.audienceStart(offset)))
    }

    mutating func writeAcknowledged(_ offset: Int64) {
        deliveries[offset]?.pendingAcks -= 1
    }

    /// Ends the audience start at `offset` once every admitted token has
    /// its ledger stored and its start done, and every write is
    /// acknowledged: what it did, for the observation.
    mutating func finish(_ offset: Int64) -> PartitionDispatcher.Observation? {
        guard let delivery = deliveries[offset], delivery.recording == 0, delivery.pendingAcks == 0,
              delivery.fanOut.isIdle, delivery.fanOut.completedThrough >= delivery.start.push.version
        else { return nil }
        deliveries.removeValue(forKey: offset)
        return .audienceStarted(
            delivery.start.push.activityID, audience: delivery.start.audience, delivered: delivery.delivered.sorted(),
            alreadyStarted: delivery.alreadyStarted)
    }
}

extension AudienceStarts.Delivery {
    mutating func withFanOut<Result>(_ body: (inout FanOut) -> Result) -> Result { body(&fanOut) }
}
