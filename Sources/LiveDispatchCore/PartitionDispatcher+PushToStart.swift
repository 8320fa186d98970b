/// Push-to-start: the partition holding an audience keeps its push-to-start
/// tokens and sends them the audience starts the partitions owning the
/// activities write to `starts`.
///
/// An audience start goes to every push-to-start token of its attributes
/// type in the audience that ``PushToStartBudget`` admits. Each admitted
/// start is first recorded in the token's ledger in `token-store`; only
/// once Kafka has it is the start sent, so a restart or a re-delivery never
/// sends a token a second start of one activity (a crash between the two
/// loses that start instead). The record's offset is committed when every
/// token was sent its start (or was pruned, or dead-lettered).
extension PartitionDispatcher {
    /// What the machine keeps of a push-to-start registration.
    struct PushToStartToken: Sendable, Hashable {
        var attributesType: String
        var registered: RegisteredToken

        init(_ registration: PushToStartRegistration) {
            attributesType = registration.attributesType
            registered = RegisteredToken(
                environment: registration.environment, expiresAt: registration.expiresAt, registeredAt: registration.registeredAt,
                app: registration.app)
        }

        func registration(_ audience: AudienceKey, _ token: DeviceToken) -> PushToStartRegistration {
            PushToStartRegistration(
                audience: audience, attributesType: attributesType, token: token, environment: registered.environment,
                expiresAt: registered.expiresAt, registeredAt: registered.registeredAt, app: registered.app)
        }
    }

    /// One audience start in progress: its tokens are sent through a
    /// ``FanOut`` of their own (retries, 410 pruning, dead letters).
    struct AudienceDelivery: Sendable {
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
        var payload: [UInt8]?
    }

    /// The push-to-start tokens of `audience`, sorted.
    public func pushToStartTokens(of audience: AudienceKey) -> [DeviceToken] {
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

    mutating func restorePushToStartToken(key: String, value: [UInt8]?) {
        guard let value else {
            let parts = key.split(separator: "\u{1E}", maxSplits: 1)
            if parts.count == 2, let audience = try? AudienceKey(String(parts[0])), let token = try? DeviceToken(hex: String(parts[1])) {
                removePushToStartToken(audience, token)
            }
            return
        }
        guard case .object(var fields)? = try? JSONValue.parse(value) else { return }
        let started = fields.removeValue(forKey: "started")
        guard var registration = try? PushToStartRegistration(json: .object(fields)), registration.action == .register else { return }
        registration.app = configuration.apps.restored(registration.app)
        audiences[registration.audience, default: [:]][registration.token] = PushToStartToken(registration)
        if let started { budget.restore(registration.token, PushToStartBudget.Ledger(json: started)) }
    }

    /// A push-to-start registration read from `tokens` (already accepted).
    mutating func pushToStartRecord(_ registration: PushToStartRegistration, offset: Int64, now: UnixTime) -> [Action] {
        var registration = registration
        let ticket = issueTicket(.completeOffsets(.tokens, [offset]))
        switch registration.action {
        case .register where !registration.isExpired(at: now):
            registration.registeredAt = registration.registeredAt ?? now
            audiences[registration.audience, default: [:]][registration.token] = PushToStartToken(registration)
            let value = Self.storedValue(registration, ledger: budget.ledger(of: registration.token))
            return [.produce(Produce(topic: .tokenStore, key: registration.storeKey, value: value, partition: partition, ticket: ticket))]
        case .register, .unregister:
            removePushToStartToken(registration.audience, registration.token)
            return [.produce(Produce(topic: .tokenStore, key: registration.storeKey, value: nil, partition: partition, ticket: ticket))]
        }
    }

    /// Forgets a push-to-start token in `audience`, and its ledger when no
    /// other audience of this partition holds it.
    private mutating func removePushToStartToken(_ audience: AudienceKey, _ token: DeviceToken) {
        audiences[audience]?.removeValue(forKey: token)
        if audiences[audience]?.isEmpty == true { audiences.removeValue(forKey: audience) }
        if !audiences.values.contains(where: { $0[token] != nil }) { budget.forget(token) }
    }

    /// Tombstones push-to-start tokens past their `expires_at`.
    mutating func sweepPushToStartTokens(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for (audience, tokens) in audiences {
            for (token, registration) in tokens where registration.registered.isExpired(at: now) {
                removePushToStartToken(audience, token)
                actions.append(.produce(Produce(
                    topic: .tokenStore, key: PushToStartRegistration.storeKey(audience, token), value: nil, partition: partition,
                    ticket: issueTicket(.nothing))))
            }
        }
        return actions
    }

    // MARK: The activity's side

    /// Writes one audience start per audience of a start command (key: the
    /// audience, so the producer's murmur2 partitioner puts it in the
    /// audience's partition). The activity's snapshot, and so its command's
    /// offset, waits for Kafka to acknowledge them.
    mutating func startAudiences(_ keys: [AudienceKey], _ push: LiveActivityPush, app: String?) -> [Action] {
        let activity = push.activityID
        let fresh = ActivityDelivery(fanOut: makeFanOut(activity))
        deliveries[activity, default: fresh].pendingAcks += keys.count
        return keys.map { audience in
            .produce(Produce(
                topic: .starts, key: audience.rawValue, value: AudienceStart(audience: audience, push: push, app: app).json.serialized(),
                partition: nil, ticket: issueTicket(.deadLetterForActivity(activity))))
        }
    }

    // MARK: The audience's side

    /// A record of this partition of `starts`.
    public mutating func audienceStartRecord(_ record: Record, now: UnixTime) -> [Action] {
        let start: AudienceStart
        switch accept(.starts, record, what: "audience start", now: now, parse: AudienceStart.init(bytes:), key: { ($0.audience.rawValue, $0.push.activityID) }) {
        case .ready(let value): start = value
        case .handled(let actions): return actions
        }
        let offset = record.offset
        let activity = start.push.activityID
        var delivery = AudienceDelivery(start: start, fanOut: makeFanOut(activity, version: 0))
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
                actions.append(.produce(Produce(
                    topic: .tokenStore, key: PushToStartRegistration.storeKey(start.audience, token), value: value,
                    partition: partition, ticket: issueTicket(.startRecorded(offset, token)))))
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
                actions.append(.produce(Produce(
                    topic: .deadLetters, key: start.audience.rawValue, value: letter.serialized(), partition: nil,
                    ticket: issueTicket(.audienceStartWrite(offset)))))
                actions.append(.observe(.deadLettered(letter)))
            }
        }
        audienceDeliveries[offset] = delivery
        return actions + finishAudienceStart(offset)
    }

    /// A token's ledger is stored: send it the start.
    mutating func startRecorded(_ offset: Int64, _ token: DeviceToken, now: UnixTime) -> [Action] {
        guard var delivery = audienceDeliveries.removeValue(forKey: offset) else { return [] }
        delivery.recording -= 1
        let fanOutActions = delivery.fanOut.addToken(token, sendCurrent: true, now: now)
        audienceDeliveries[offset] = delivery
        return performAudienceStart(fanOutActions, offset, now: now)
    }

    mutating func audienceStartTimer(_ offset: Int64, now: UnixTime) -> [Action] {
        guard var delivery = audienceDeliveries.removeValue(forKey: offset) else { return [] }
        let fanOutActions = delivery.fanOut.timerFired(now: now)
        audienceDeliveries[offset] = delivery
        return performAudienceStart(fanOutActions, offset, now: now)
    }

    mutating func audienceStartSent(_ offset: Int64, _ send: Send, outcome: FanOut.Outcome, now: UnixTime, jitter: Double) -> [Action] {
        guard var delivery = audienceDeliveries.removeValue(forKey: offset) else { return [] }
        if outcome == .delivered { delivery.delivered.append(send.token) }
        let fanOutActions = delivery.fanOut.completed(token: send.token, version: send.push.version, outcome: outcome, now: now, jitter: jitter)
        audienceDeliveries[offset] = delivery
        return performAudienceStart(fanOutActions, offset, now: now)
    }

    mutating func performAudienceStart(_ fanOutActions: [FanOut.Action], _ offset: Int64, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var pending = fanOutActions[...]
        while true {
            guard let action = pending.popFirst() else {
                // Sends the partition's budget lets start now, if tokens wait.
                let more = continueSending(.audienceStart(offset), now: now)
                if more.isEmpty { break }
                pending.append(contentsOf: more)
                continue
            }
            guard var delivery = audienceDeliveries[offset] else { return actions }
            let audience = delivery.start.audience
            let activity = delivery.start.push.activityID
            switch action {
            case .send(let token, let push):
                let encoded = delivery.payload.map { Result<[UInt8], PayloadTooLargeError>.success($0) }
                    ?? Result { () throws(PayloadTooLargeError) in try APNsPayload.encode(push) }
                switch encoded {
                case .success(let payload):
                    delivery.payload = payload
                    audienceDeliveries[offset] = delivery
                    let destination = delivery.destinations[token]
                    sendBudget.started()
                    actions.append(.send(Send(
                        activityID: activity, token: token, environment: destination?.environment ?? configuration.defaultEnvironment,
                        app: destination?.app, push: push, payload: payload, audienceStart: offset)))
                case .failure(let error):
                    pending.append(contentsOf: delivery.fanOut.completed(
                        token: token, version: push.version, outcome: .permanent(reason: error.description), now: now, jitter: 0))
                    audienceDeliveries[offset] = delivery
                }
            case .wake(let at):
                wakes.schedule(.retryStart(offset), at: at)
            case .removeToken(let token, let reason):
                actions.append(.observe(.tokenRemoved(activity, token, reason: reason)))
                removePushToStartToken(audience, token)
                audienceDeliveries[offset]?.pendingAcks += 1
                actions.append(.produce(Produce(
                    topic: .tokenStore, key: PushToStartRegistration.storeKey(audience, token), value: nil, partition: partition,
                    ticket: issueTicket(.audienceStartWrite(offset)))))
            case .deadLetter(let token, let push, let reason, let detail, let attempts):
                let letter = DeadLetter(
                    reason: reason,
                    message: "start of activity \(activity) to push-to-start token \(token.hex) in audience \(audience) failed: \(detail)",
                    activityID: activity, token: token,
                    details: ["apns.reason": .string(detail), "attempts": .integer(Int64(attempts)), "version": .integer(Int64(clamping: push.version)), "audience": .string(audience.rawValue)],
                    deadLetteredAt: now)
                audienceDeliveries[offset]?.pendingAcks += 1
                actions.append(.produce(Produce(
                    topic: .deadLetters, key: audience.rawValue, value: letter.serialized(), partition: nil,
                    ticket: issueTicket(.audienceStartWrite(offset)))))
                actions.append(.observe(.deadLettered(letter)))
            case .completed:
                break  // read from the fan-out in finishAudienceStart
            }
        }
        return actions + finishAudienceStart(offset)
    }

    /// Completes the audience start's offset once every admitted token has
    /// its ledger stored and its start done, and every write is acknowledged.
    mutating func finishAudienceStart(_ offset: Int64) -> [Action] {
        guard let delivery = audienceDeliveries[offset], delivery.recording == 0, delivery.pendingAcks == 0,
              delivery.fanOut.isIdle, delivery.fanOut.completedThrough >= delivery.start.push.version
        else { return [] }
        audienceDeliveries.removeValue(forKey: offset)
        return [.observe(.audienceStarted(
            delivery.start.push.activityID, audience: delivery.start.audience, delivered: delivery.delivered.sorted(),
            alreadyStarted: delivery.alreadyStarted))]
            + complete(.starts, [offset])
    }
}
