/// The activities' side of a partition: which update tokens each activity
/// has, and how its pushes reach them. Per activity it decides which
/// version each token is sent (one ``FanOut``, sharing the partition's send
/// budget), what a push waits for before it is complete (every token done,
/// every dead letter and token record it caused acknowledged), and what the
/// completion writes: the activity's snapshot with its push history.
///
/// A token's `token-store` record names its last outcome only when that
/// changes (a failure, and the delivery after one), so the write load
/// follows failures, not pushes.
struct ActivityDeliveries: Sendable {
    typealias Action = PartitionDispatcher.Action
    typealias RegisteredToken = PartitionDispatcher.RegisteredToken

    struct Delivery: Sendable {
        var fanOut: FanOut
        /// Flushes published and not yet complete, oldest first.
        var flushes: [Coalescer.Flush] = []
        /// Dead letters and token records not yet acknowledged; a completed
        /// flush waits for them before its snapshot is written.
        var pendingAcks = 0
        /// Versions never fanned out (their payload was too large): complete
        /// as soon as every version before them is.
        var skipped: Set<UInt64> = []
        var payloads = PayloadCache()
        /// Sends that ended for good, by version, until their push completes.
        var counts: [UInt64: PushSummary.Counts] = [:]

        /// The activity's device tokens, its channel not counted.
        var deviceTokenCount: Int { fanOut.tokenCount - (fanOut.contains(.broadcastChannel) ? 1 : 0) }

        mutating func withFanOut<Result>(_ body: (inout FanOut) -> Result) -> Result { body(&fanOut) }
    }

    /// A push that reached every token: what its snapshot and observation say.
    struct Completion: Sendable {
        var newest: Coalescer.Flush
        var offsets: [Int64]
        /// The traced commands of every flush it completes, the newest last.
        var traces: [CommandTrace]
        var history: [PushSummary]
        /// The newest push's summary (the last of `history`).
        var summary: PushSummary
        /// The ids of the commands its pushes merged.
        var commandIDs: [String]
        var tokens: Int
        var sample: [DeviceToken]
    }

    let configuration: PartitionDispatcher.Configuration
    private(set) var registrations: [ActivityID: TokenTable<RegisteredToken>] = [:]
    private var deliveries: [ActivityID: Delivery] = [:]
    /// The newest completed pushes of each activity, written in its snapshots.
    private var pushHistory: [ActivityID: [PushSummary]] = [:]
    /// Restored tokens registered after their activity's last snapshot, to
    /// be sent its state once the restore's catch-up is over.
    private var lateTokens: [ActivityID: [DeviceToken]] = [:]

    init(configuration: PartitionDispatcher.Configuration) {
        self.configuration = configuration
    }

    func tokens(of activity: ActivityID) -> [DeviceToken] {
        registrations[activity].map { $0.tokens.sorted() } ?? []
    }

    func pushes(of activity: ActivityID) -> [PushSummary] { pushHistory[activity] ?? [] }

    /// Whether no activity has a send in flight, queued or waiting, or a
    /// push not yet complete.
    var isIdle: Bool { deliveries.values.allSatisfy { $0.fanOut.isIdle && $0.flushes.isEmpty } }

    /// Whether the activity has nothing in flight, queued, waiting for a
    /// retry or an acknowledgement, and no push not yet complete.
    func isIdle(_ activity: ActivityID) -> Bool {
        guard lateTokens[activity] == nil else { return false }
        guard let delivery = deliveries[activity] else { return true }
        return delivery.fanOut.isIdle && delivery.flushes.isEmpty && delivery.pendingAcks == 0
    }

    func wantsToSend(_ activity: ActivityID) -> Bool { deliveries[activity]?.fanOut.wantsToSend == true }

    /// Runs `body` on the activity's fan-out; nil when it has none.
    mutating func withFanOut<Result>(_ activity: ActivityID, _ body: (inout FanOut) -> Result) -> Result? {
        deliveries[activity]?.withFanOut(body)
    }

    /// A fan-out that starts sends only when the partition's budget gives
    /// it some; its tokens hold `version` already.
    private func delivery(_ activity: ActivityID, version: UInt64) -> Delivery {
        Delivery(fanOut: .sharingBudget(activity, version: version, configuration: configuration.fanOut))
    }

    // MARK: Restore

    /// An update token's registration (key: activity U+001F token) read
    /// back from `token-store`; a tombstone removes it.
    mutating func restoreToken(key: [UInt8], value: [UInt8]?) {
        guard let value else {
            if let separator = key.firstIndex(of: 0x1F),
                let activity = try? ActivityID(String(decoding: key[..<separator], as: UTF8.self)),
                let token = try? DeviceToken(hex: String(decoding: key[(separator + 1)...], as: UTF8.self))
            {
                removeRegistration(activity, token)
            }
            return
        }
        guard var registration = try? TokenRegistration(bytes: value), registration.action == .register else { return }
        registration.app = configuration.apps.restored(registration.app)
        registrations[registration.activityID, default: TokenTable()].insert(registration.token, RegisteredToken(registration))
    }

    /// The push history in a snapshot read back from `state`.
    mutating func restoreHistory(_ activity: ActivityID, snapshot: JSONValue) {
        pushHistory[activity] = PushSummary.history(of: snapshot)
    }

    mutating func forgetHistory(_ activity: ActivityID) {
        pushHistory.removeValue(forKey: activity)
    }

    /// Gives each activity with restored tokens its fan-out, holding the
    /// activity's restored state: nothing is sent until it changes. A token
    /// registered at or after the snapshot's last push completed may have
    /// missed its catch-up send before the restart: it is remembered, and
    /// ``resendLate(now:)`` sends it the state once the new owner's own
    /// catch-up is over (so a token registered after an end still gets it).
    mutating func installRestored(_ coalescer: Coalescer) {
        for (activity, tokens) in registrations {
            let state = coalescer.state(of: activity)
            var delivery = delivery(activity, version: state?.version ?? 0)
            if let state, state.version > 0 {
                delivery.fanOut.restoreLatest(PartitionDispatcher.restoredPush(state, configuration: configuration))
                if let completedAt = pushHistory[activity]?.last?.completedAt {
                    let late = zip(tokens.tokens, tokens.values).compactMap { token, registered in
                        (registered.registeredAt.map { $0 >= completedAt } ?? false) ? token : nil
                    }
                    if !late.isEmpty { lateTokens[activity] = late }
                }
            }
            delivery.fanOut.restoreTokens(tokens.tokens)
            deliveries[activity] = delivery
        }
    }

    /// Sends the tokens ``installRestored(_:)`` found registered late the
    /// activity's current state: the fan-outs' actions, by activity.
    mutating func resendLate(now: UnixTime) -> [(activity: ActivityID, actions: [FanOut.Action])] {
        let late = lateTokens.sorted { $0.key < $1.key }
        lateTokens = [:]
        return late.map { activity, tokens in
            (activity, tokens.flatMap { deliveries[activity]?.fanOut.resend($0, now: now) ?? [] })
        }
    }

    // MARK: Registrations

    /// Registers an update token, keeping a failure its record names, and
    /// sends it the activity's current state: the record to store, and
    /// the fan-out's actions.
    ///
    /// A token it has already whose last push failed for good (its record
    /// names the failure) is sent the current state again: the device
    /// registered it anew, or its dead letter was replayed. While a new
    /// owner catches up (`catchingUp`), that waits for ``resendLate(now:)``,
    /// so no state older than the replay's reaches it.
    mutating func register(
        _ registration: TokenRegistration, state: ActivityState?, now: UnixTime, catchingUp: Bool = false
    ) -> (stored: TokenRegistration, fanOut: [FanOut.Action]) {
        var registration = registration
        let activity = registration.activityID
        registration.registeredAt = registration.registeredAt ?? now
        // Outcomes are the worker's own; a failure already recorded is kept.
        registration.lastOutcome = nil
        if case .failed(let outcome)? = registrations[activity]?[registration.token]?.recorded { registration.lastOutcome = outcome }
        registrations[activity, default: TokenTable()].insert(registration.token, RegisteredToken(registration))
        if registration.lastOutcome != nil, deliveries[activity]?.fanOut.contains(registration.token) == true {
            if catchingUp {
                lateTokens[activity, default: []].append(registration.token)
                return (registration, [])
            }
            return (registration, deliveries[activity]?.fanOut.resend(registration.token, now: now) ?? [])
        }
        if deliveries[activity] == nil { deliveries[activity] = delivery(activity, version: state?.version ?? 0) }
        if deliveries[activity]?.fanOut.latest == nil, let state, state.version > 0 {
            deliveries[activity]?.fanOut.restoreLatest(PartitionDispatcher.restoredPush(state, configuration: configuration))
        }
        let actions = deliveries[activity]?.fanOut.addToken(registration.token, sendCurrent: true, now: now) ?? []
        return (registration, actions)
    }

    /// Forgets an update token (unregistered or expired): the fan-out's actions.
    mutating func unregister(_ activity: ActivityID, _ token: DeviceToken) -> [FanOut.Action] {
        removeRegistration(activity, token)
        return deliveries[activity]?.fanOut.removeToken(token) ?? []
    }

    private mutating func removeRegistration(_ activity: ActivityID, _ token: DeviceToken) {
        registrations[activity]?.remove(token)
        if registrations[activity]?.isEmpty == true { registrations.removeValue(forKey: activity) }
    }

    /// The channel joins the activity's fan-out holding the version its
    /// tokens were last sent: it is sent only what comes after.
    mutating func addChannel(_ activity: ActivityID, version: UInt64, now: UnixTime) -> [FanOut.Action] {
        if deliveries[activity] == nil { deliveries[activity] = delivery(activity, version: version) }
        return deliveries[activity]?.fanOut.addToken(.broadcastChannel, sendCurrent: false, now: now) ?? []
    }

    /// Writes made for the activity that its next snapshot waits for (its
    /// audience starts); `version` is the activity's, for a new fan-out.
    mutating func awaitWrites(_ count: Int, of activity: ActivityID, version: UInt64) {
        if deliveries[activity] == nil { deliveries[activity] = delivery(activity, version: version) }
        deliveries[activity]?.pendingAcks += count
    }

    mutating func writeAcknowledged(_ activity: ActivityID) {
        deliveries[activity]?.pendingAcks -= 1
    }

    // MARK: Pushes

    /// A flush to send: its payload is checked once for every token. The
    /// fan-out's actions, or nil when the payload is too large (the version
    /// is then dead-lettered and completes without a send).
    mutating func publish(
        _ flush: Coalescer.Flush, version: UInt64, now: UnixTime, writes: inout PartitionWrites
    ) -> (actions: [Action], fanOut: [FanOut.Action]?) {
        let activity = flush.push.activityID
        if deliveries[activity] == nil { deliveries[activity] = delivery(activity, version: version) }
        let push = flush.push
        do throws(PayloadTooLargeError) {
            // A broadcast activity's pushes may take the channel's larger limit.
            let delivery: APNsPayload.Delivery = deliveries[activity]?.fanOut.contains(.broadcastChannel) == true ? .broadcast : .device
            // Written once per version (by the coalescer's size check when
            // it could): every token's send shares it.
            let bytes = try APNsPayload.checked(flush.payload ?? APNsPayload.bytes(for: push), of: activity, for: delivery)
            // Kept for the sends only when the fan-out takes this version
            // (it ignores one not newer than what its tokens have).
            if deliveries[activity]?.fanOut.takes(push) == true { deliveries[activity]?.payloads.keep(bytes, for: push) }
        } catch {
            let letter = DeadLetter(
                reason: .payloadTooLarge, message: error.description, activityID: activity,
                details: [
                    "size": .integer(Int64(error.size)), "limit": .integer(Int64(error.limit)),
                    "version": .integer(Int64(clamping: flush.push.version)),
                ],
                deadLetteredAt: now)
            // The state moved on even though no device can be sent it.
            deliveries[activity]?.pendingAcks += 1
            deliveries[activity]?.flushes.append(flush)
            deliveries[activity]?.skipped.insert(flush.push.version)
            return (writes.deadLetter(letter, key: activity.rawValue, then: .awaitedBy(.activity(activity))), nil)
        }
        deliveries[activity]?.flushes.append(flush)
        var actions: [Action] = []
        if let requested = flush.push.downgradedFrom {
            actions.append(.observe(.priorityDowngraded(activity, version: flush.push.version, from: requested, to: flush.push.priority)))
        }
        return (actions, deliveries[activity]?.fanOut.publish(push, now: now) ?? [])
    }

    /// The send of `push` to an update token, its payload encoded once per
    /// version; a payload over the limit settles the send unsent. An update
    /// token belongs to an activity already on its device: it is planned a
    /// start as an update of the same state, never a start (semantic 14).
    mutating func plan(_ activity: ActivityID, _ token: DeviceToken, _ push: LiveActivityPush) -> PartitionDispatcher.SendPlan {
        let push = token == .broadcastChannel ? push : push.asUpdate
        switch deliveries[activity]?.payloads.payload(for: push) ?? PayloadCache.encode(push) {
        case .success(let payload) where token != .broadcastChannel && payload.count > APNsPayload.deviceLimit:
            // A broadcast push within the channel's limit, over a device's.
            return .settle(.permanent(reason: PayloadTooLargeError(activityID: activity, size: payload.count, limit: APNsPayload.deviceLimit).description))
        case .success(let payload):
            let registered = registrations[activity]?[token]
            return .send(PartitionDispatcher.Send(
                activityID: activity, token: token, environment: registered?.environment ?? configuration.defaultEnvironment,
                app: registered?.app, push: push, payload: payload))
        case .failure(let error):
            return .settle(.permanent(reason: error.description))
        }
    }

    /// A send the fan-out settled: counted in its push's summary; a token
    /// whose record names a failure has the delivery recorded.
    mutating func settled(
        _ send: PartitionDispatcher.Send, _ settlement: FanOut.Settlement, now: UnixTime, writes: inout PartitionWrites
    ) -> [Action] {
        let (activity, version) = (send.activityID, send.push.version)
        switch settlement {
        case .delivered:
            deliveries[activity]?.counts[version, default: .init()].delivered()
            guard case .failed? = registrations[activity]?[send.token]?.recorded else { return [] }
            let delivered = TokenOutcome(result: .delivered, version: version, event: send.push.event, at: now)
            return record(delivered, of: send.token, in: activity, writes: &writes)
        case .failed(let reason):
            deliveries[activity]?.counts[version, default: .init()].failed(reason)
            return []
        case .undecided:
            return []
        }
    }

    /// APNs reports an update token gone: it is forgotten and tombstoned;
    /// the push waits for the tombstone.
    mutating func removeToken(_ activity: ActivityID, _ token: DeviceToken, reason: String, writes: inout PartitionWrites) -> [Action] {
        removeRegistration(activity, token)
        deliveries[activity]?.pendingAcks += 1
        return [
            .observe(.tokenRemoved(activity, token, reason: reason)),
            writes.produce(.tokenStore, key: TokenRegistration.storeKey(activity, token), value: nil, then: .awaitedBy(.activity(activity))),
        ]
    }

    /// A push to a token (or to `channel`, the activity's broadcast
    /// channel) failed for good: dead-lettered, and recorded in the token's
    /// `token-store` record.
    mutating func deadLetter(
        _ activity: ActivityID, _ failure: PartitionDispatcher.SendFailure, channel: ActivityChannel?, now: UnixTime,
        writes: inout PartitionWrites
    ) -> [Action] {
        let token = failure.token
        let broadcast = token == .broadcastChannel
        // What the token was sent (``plan(_:_:_:)``).
        let push = broadcast ? failure.push : failure.push.asUpdate
        var details = failure.details
        details["priority"] = .integer(Int64(push.priority.rawValue))
        if let requested = push.downgradedFrom { details["priority_downgraded_from"] = .integer(Int64(requested.rawValue)) }
        if broadcast, let channel { details["channel_id"] = .string(channel.id) }
        let destination = broadcast ? "broadcast channel \(channel?.id ?? "(none)")" : "token \(token.hex)"
        let letter = DeadLetter(
            reason: failure.reason, message: "push version \(push.version) of activity \(activity) to \(destination) failed: \(failure.detail)",
            activityID: activity, token: broadcast ? nil : token, details: details, deadLetteredAt: now)
        deliveries[activity]?.pendingAcks += 1
        var actions = writes.deadLetter(letter, key: activity.rawValue, then: .awaitedBy(.activity(activity)))
        if deliveries[activity] != nil {
            let failed = TokenOutcome(result: .failed, reason: failure.detail, version: push.version, event: push.event, at: now)
            actions += record(failed, of: token, in: activity, writes: &writes)
        }
        return actions
    }

    /// A write of the activity's that its next snapshot waits for, outside
    /// its fan-out (its channel refused).
    mutating func awaitWrite(of activity: ActivityID) {
        deliveries[activity]?.pendingAcks += 1
    }

    /// Writes `outcome` in the token's `token-store` record; the activity's
    /// next snapshot waits for its ack, so a reader that sees the snapshot
    /// sees the outcome too.
    private mutating func record(
        _ outcome: TokenOutcome, of token: DeviceToken, in activity: ActivityID, writes: inout PartitionWrites
    ) -> [Action] {
        guard var registered = registrations[activity]?[token] else { return [] }
        registered.recorded = outcome.result == .failed ? .failed(outcome) : .clear
        registrations[activity]?[token] = registered
        deliveries[activity]?.pendingAcks += 1
        let record = registered.registration(activity, token, outcome: outcome)
        return [writes.produce(.tokenStore, key: record.storeKey, value: record.json.serialized(), then: .awaitedBy(.activity(activity)))]
    }

    /// Takes the flushes every token has reached, once nothing the activity
    /// wrote waits for an ack: the newest of them, with every offset they
    /// carried and the push's summary added to the activity's history.
    mutating func complete(_ activity: ActivityID, now: UnixTime) -> Completion? {
        guard deliveries[activity]?.pendingAcks == 0, var delivery = deliveries.removeValue(forKey: activity) else { return nil }
        defer { deliveries[activity] = delivery }
        let through = delivery.fanOut.completedThrough
        var offsets: [Int64] = []
        var traces: [CommandTrace] = []
        var commandIDs: [String] = []
        var newest: Coalescer.Flush?
        while let first = delivery.flushes.first,
              first.push.version <= through || delivery.skipped.contains(first.push.version)
        {
            delivery.skipped.remove(first.push.version)
            delivery.flushes.removeFirst()
            offsets += first.offsets
            commandIDs = Coalescer.Flush.appending(first.commandIDs, to: commandIDs)
            if !first.traces.isEmpty { traces = CommandTrace.appending(first.traces, to: traces) }
            newest = first
        }
        guard let newest else { return nil }
        var counts = PushSummary.Counts()
        for (version, tally) in delivery.counts where version <= newest.push.version {
            counts.add(tally)
            delivery.counts.removeValue(forKey: version)
        }
        let summary = PushSummary(
            version: newest.push.version, event: newest.push.event, completedAt: now, commands: offsets.count,
            delivered: counts.delivered, failed: counts.failed)
        let history = Array(((pushHistory[activity] ?? []) + [summary]).suffix(PushSummary.historyLimit))
        pushHistory[activity] = history
        return Completion(
            newest: newest, offsets: offsets, traces: traces, history: history, summary: summary, commandIDs: commandIDs, tokens: delivery.deviceTokenCount,
            sample: registrations[activity].map { Array($0.tokens.prefix(4)).sorted() } ?? [])
    }

    // MARK: Expiry

    /// Forgets an expired activity: its tokens, to tombstone, and the
    /// offsets of the pushes it had not completed.
    mutating func expire(_ activity: ActivityID) -> (tokens: [DeviceToken], heldOffsets: [Int64]) {
        pushHistory.removeValue(forKey: activity)
        let tokens = (registrations.removeValue(forKey: activity)?.tokens ?? []).sorted()
        return (tokens, deliveries.removeValue(forKey: activity)?.flushes.flatMap(\.offsets) ?? [])
    }

    /// Tokens past their `expires_at`, or registered `maxAge` ago to an
    /// activity with no state, by activity.
    func expiredTokens(now: UnixTime, hasState: (ActivityID) -> Bool) -> [(activity: ActivityID, tokens: [DeviceToken])] {
        var expired: [(activity: ActivityID, tokens: [DeviceToken])] = []
        for (activity, tokens) in registrations {
            let stateless = !hasState(activity)
            var due: [DeviceToken] = []
            for (token, registration) in zip(tokens.tokens, tokens.values) {
                let orphaned = stateless && (registration.registeredAt ?? now) + configuration.coalescer.maxAge <= now
                if registration.isExpired(at: now) || orphaned { due.append(token) }
            }
            if !due.isEmpty { expired.append((activity, due)) }
        }
        return expired
    }

    /// Drops the fan-out of an activity with neither tokens nor state.
    mutating func dropIfAbandoned(_ activity: ActivityID, hasState: Bool) {
        if registrations[activity] == nil, !hasState { deliveries.removeValue(forKey: activity) }
    }
}
