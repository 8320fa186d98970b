/// Everything the dispatcher decides for one partition number of the
/// co-partitioned `commands`, `tokens`, `starts`, `state` and `token-store`
/// topics. A composer: it reads each record in offset order, hands it to the
/// machine whose job it is, and performs what they decide as its
/// ``Action``s; the worker's dispatcher service performs those (sends,
/// produces, commits) and reports back.
///
/// - ``PartitionRestore``: the restore, records that arrive during it, and
///   the catch-up of a new owner;
/// - the ``Coalescer``: each activity's state and when a push is due;
/// - ``ActivityLifecycle``: each activity's life: ended, its end done on
///   every token, dismissed (a marker kept), forgotten, started again;
/// - ``ActivityDeliveries``: each activity's update tokens and the fan-out
///   of its pushes to them;
/// - ``AudienceStarts``: push-to-start tokens and the audience starts sent
///   to them (`PartitionDispatcher+PushToStart.swift`);
/// - ``ChannelSlots``: broadcast activities' channels (`+Channels`);
/// - ``SendBudget``: the partition's share of the sends in flight (`+SendBudget`);
/// - ``PartitionWrites`` and three ``OffsetTracker`` partitions: what each
///   write's acknowledgement finishes, and what may be committed.
///
/// A new capability adds a machine here, not fields to the others. Every
/// fan-out's actions, whoever owns it, are performed in one place
/// (`+FanOutActions`).
///
/// It owns its timers: flush deadlines, retry wake-ups and the periodic
/// expiry sweep live in one ``DeadlineQueue``; the owner keeps a single
/// wake-up armed at ``nextDeadline`` and calls ``timerFired(now:)`` when it
/// passes (early or repeated calls are harmless).
///
/// An offset becomes committable only when its record is fully handled:
/// a command when the push that carried it reached every token and the
/// activity's snapshot (and any dead letters) were acknowledged by Kafka; a
/// registration when `token-store` acknowledged it; a bad record when its
/// dead letter was acknowledged.
public struct PartitionDispatcher: Sendable {
    public let partition: Int32
    public let configuration: Configuration
    var coalescer: Coalescer
    var lifecycle: ActivityLifecycle
    var restore = PartitionRestore()
    var activities: ActivityDeliveries
    var audienceStarts: AudienceStarts
    var channels = ChannelSlots()
    var sendBudget: SendBudget
    var writes: PartitionWrites
    var wakes = DeadlineQueue<Wake>()
    private var nextSweep: UnixTime?
    private var trackers = OffsetTracker()

    public init(partition: Int32, configuration: Configuration) {
        self.partition = partition
        self.configuration = configuration
        self.coalescer = Coalescer(configuration: configuration.coalescer)
        self.lifecycle = ActivityLifecycle(
            configuration: .init(maxAge: configuration.coalescer.maxAge, endedRetention: configuration.coalescer.endedRetention))
        self.activities = ActivityDeliveries(configuration: configuration)
        self.audienceStarts = AudienceStarts(budget: configuration.pushToStart)
        self.sendBudget = SendBudget(limit: configuration.maxInFlight)
        self.writes = PartitionWrites(partition: partition)
        trackers.assign(Self.trackerPartition(.commands, partition))
        trackers.assign(Self.trackerPartition(.tokens, partition))
        trackers.assign(Self.trackerPartition(.starts, partition))
    }

    static func trackerPartition(_ topic: InternalTopic, _ number: Int32) -> OffsetTracker.Partition {
        OffsetTracker.Partition(topic: topic.rawValue, number: number)
    }

    /// Records read and not yet fully handled: the back-pressure measure.
    public var outstanding: Int { trackers.outstanding }
    public var isReady: Bool { !restore.isRestoring }
    public var activityCount: Int { coalescer.activityCount }
    public func state(of activityID: ActivityID) -> ActivityState? { coalescer.state(of: activityID) }
    public func pushes(of activityID: ActivityID) -> [PushSummary] { activities.pushes(of: activityID) }
    public func tokens(of activityID: ActivityID) -> [DeviceToken] { activities.tokens(of: activityID) }

    // MARK: Restore

    /// A snapshot read back from `state`; a tombstone (nil) removes it.
    public mutating func restoreState(key: String, value: [UInt8]?) {
        guard let value else {
            let activity = try? ActivityID(key)
            if let activity { lifecycle.forget(activity) }
            forgetRestored(key: key, activity)
            return
        }
        guard let json = try? FieldReader.parse(value), let snapshot = try? ActivityState(json: json) else { return }
        lifecycle.restore(snapshot)
        // A dismissed activity's marker: its id stays ended (the lifecycle
        // has it), with no state, history or channel.
        guard snapshot.dismissedAt == nil else { return forgetRestored(key: key, snapshot.activityID) }
        restore.restore(snapshot)
        activities.restoreHistory(snapshot.activityID, snapshot: json)
        channels.restore(snapshot.activityID, ActivityChannel.inSnapshot(json))
    }

    /// Drops what was restored of an activity's state so far.
    private mutating func forgetRestored(key: String, _ activity: ActivityID?) {
        restore.removeState(key: key)
        guard let activity else { return }
        activities.forgetHistory(activity)
        channels.forget(activity)
    }

    /// A registration read back from `token-store`; a tombstone removes it.
    public mutating func restoreToken(key: String, value: [UInt8]?) {
        restoreToken(key: Array(key.utf8), value: value)
    }

    /// ``restoreToken(key:value:)`` with the record's key as it came: a
    /// registration's key is only read for a tombstone.
    public mutating func restoreToken(key: [UInt8], value: [UInt8]?) {
        if key.contains(0x1E) {
            audienceStarts.restore(key: String(decoding: key, as: UTF8.self), value: value, apps: configuration.apps)
        } else {
            activities.restoreToken(key: key, value: value)
        }
    }

    /// The changelogs are read to their end: install them and replay any
    /// records that arrived meanwhile.
    public mutating func finishRestore(now: UnixTime) -> [Action] {
        guard let (states, early) = restore.finish(now: now, catchUpLimit: configuration.catchUpLimit) else { return [] }
        for snapshot in states { coalescer.restore(snapshot) }
        var actions: [Action] = []
        activities.installRestored(coalescer)
        installRestoredChannels(now: now)
        nextSweep = now + configuration.sweepInterval
        for (topic, record) in early {
            switch topic {
            case .commands: actions += command(record, now: now)
            case .tokens: actions += tokenRecord(record, now: now)
            case .starts: actions += audienceStartRecord(record, now: now)
            case .state, .tokenStore, .deadLetters, .channels, .outcomes: break
            }
        }
        return actions + resendLateTokens(now: now)
    }

    /// Once no catch-up holds pushes: the restored tokens registered after
    /// their activity's last snapshot are sent its state.
    private mutating func resendLateTokens(now: UnixTime) -> [Action] {
        guard !restore.isCatchingUp else { return [] }
        return activities.resendLate(now: now).flatMap { perform($0.actions, for: .activity($0.activity), now: now) }
    }

    /// The push a restored state stands for: what its tokens already hold.
    static func restoredPush(_ state: ActivityState, configuration: Configuration) -> LiveActivityPush {
        LiveActivityPush(
            activityID: state.activityID, version: state.version, event: state.isEnded ? .end : .update,
            contentState: state.contentState, timestamp: state.timestamp ?? state.createdAt,
            priority: configuration.coalescer.defaultPriority, staleDate: state.staleDate,
            dismissalDate: state.isEnded ? state.dismissalDate : nil, relevanceScore: state.relevanceScore)
    }

    /// While restoring: hold every push until the `commands` record before
    /// `end` (the partition's end offset when it was assigned) has been read,
    /// or `catchUpLimit` seconds after the restore, then push each activity's
    /// newest state once. An empty partition (`end` 0) holds nothing.
    /// `tokensEnd`: the `tokens` offset after the last registration this
    /// owner has not read yet; the catch-up also waits for the
    /// registrations up to there (nil: none to wait for).
    public mutating func holdPushes(untilCommandOffset end: Int64, tokenOffset tokensEnd: Int64? = nil) {
        restore.holdPushes(untilCommandOffset: end, tokenOffset: tokensEnd)
    }

    /// Whether pushes are held for the replay of the previous owner's commands.
    public var isCatchingUp: Bool { restore.isCatchingUp }

    // MARK: Records

    /// A record of this partition of `commands`.
    public mutating func command(_ record: Record, now: UnixTime) -> [Action] {
        let actions = applyCommand(record, now: now)
        return actions + publishCaughtUp(restore.read(commandOffset: record.offset), now: now)
    }

    /// Publishes the flushes a catch-up held, as it ends, each merged with
    /// what its activity's window still holds: the replay's last commands
    /// may wait there, newer than what was held and than what the previous
    /// owner pushed, so the held state alone would reach devices after a newer one.
    private mutating func publishCaughtUp(_ held: [Coalescer.Flush], now: UnixTime) -> [Action] {
        let merged = held.map { flush in
            coalescer.flushNow(flush.push.activityID, now: now).map { .merged(flush, $0) } ?? flush
        }
        return publish(merged, now: now) + resendLateTokens(now: now)
    }

    private mutating func applyCommand(_ record: Record, now: UnixTime) -> [Action] {
        var parsed: ActivityCommand
        let apps = configuration.apps
        let parse = { (bytes: [UInt8]) throws(FieldError) in try ActivityCommand(bytes: bytes, apps: apps) }
        switch accept(.commands, record, what: "command", now: now, parse: parse, key: { ($0.activityID.rawValue, $0.activityID) }) {
        case .ready(let command): parsed = command
        case .handled(let actions): return actions
        }
        parsed.trace = record.trace
        let activity = parsed.activityID
        var restarted: [Action] = []
        switch lifecycle.admission(of: parsed, offset: record.offset) {
        case .apply: break
        case .alreadyApplied: return complete(.commands, [record.offset])
        case .refuse(let message):
            return deadLetterRecord(.commands, record, reason: .activityEnded, message: message, activityID: activity, now: now)
        case .restart(let marker): begin(activity, after: marker, now: now)
        }
        var received = receive(parsed, record, now: now)
        if case .reject(.activityEnded, _, _) = received, parsed.event == .start, let state = coalescer.state(of: activity) {
            switch lifecycle.restart(state, now: now) {
            case .begin(let marker):
                // The old life's tokens belonged to the activity that ended on their devices.
                restarted = drop(activity, state: .keep)
                begin(activity, after: marker, now: now)
                received = receive(parsed, record, now: now)
            case .refuse(let message):
                received = .reject(.activityEnded, message: message, details: [:])
            }
        }
        if let state = coalescer.state(of: activity) { lifecycle.applied(state) }
        return restarted + outcome(of: received, parsed, record, now: now)
    }

    /// The coalescer's verdict on a command; a broadcast activity's pushes
    /// have the channel's size limit.
    private mutating func receive(_ command: ActivityCommand, _ record: Record, now: UnixTime) -> Coalescer.ReceiveAction {
        let activity = command.activityID
        let broadcast = command.broadcast == true || channels.channel(of: activity) != nil || channels.isCreating(activity)
        return coalescer.receive(
            command, offset: record.offset, recordTime: record.timestamp, now: now, delivery: broadcast ? .broadcast : .device)
    }

    /// A new life for an ended id, after `marker`.
    private mutating func begin(_ activity: ActivityID, after marker: ActivityLifecycle.Marker, now: UnixTime) {
        coalescer.begin(activity, after: marker, now: now)
        lifecycle.restarted(activity, createdAt: now)
    }

    private mutating func outcome(
        of received: Coalescer.ReceiveAction, _ parsed: ActivityCommand, _ record: Record, now: UnixTime
    ) -> [Action] {
        switch received {
        case .alreadyApplied:
            return complete(.commands, [record.offset])
        case .duplicate(let commandID):
            return [.observe(.duplicateCommand(parsed.activityID, commandID: commandID))] + complete(.commands, [record.offset])
        case .reject(let reason, let message, let details):
            return deadLetterRecord(.commands, record, reason: reason, message: message, activityID: parsed.activityID, details: details, now: now)
        case .scheduleFlush(let at):
            wakes.schedule(.flush(parsed.activityID), at: at)
            return unchecked(parsed) + beginChannel(for: parsed)
        case .flush(var flush):
            let channelActions = unchecked(parsed) + beginChannel(for: parsed)
            guard parsed.event == .start, !parsed.audiences.isEmpty else { return channelActions + publish(flush, now: now) }
            let actions = channelActions + startAudiencesWithChannel(parsed.audiences, flush.push, app: flush.snapshot.app)
            // The devices started through their push-to-start tokens hold the
            // activity: its update tokens are sent the state as an update.
            flush.push.event = .update
            flush.push.alert = nil
            return actions + publish(flush, now: now)
        }
    }

    /// The observation of a command applied without a type check.
    private func unchecked(_ command: ActivityCommand) -> [Action] {
        let checking = coalescer.types.checking(command, known: coalescer.state(of: command.activityID)?.attributesType)
        guard checking.uncheckedLabel != nil else { return [] }
        return [.observe(.uncheckedCommand(command.activityID, checking))]
    }

    /// Makes `types` the activity types later commands are checked against
    /// (the rules were reloaded).
    public mutating func useTypes(_ types: ActivityTypes) {
        coalescer.types = types
    }

    enum Acceptance<Value> {
        case ready(Value)
        /// Buffered until the restore ends, or dead-lettered.
        case handled([Action])
    }

    /// Takes a record into the offset tracker and reads its value; a record
    /// that is not valid, or whose key is not the one it must have (its
    /// activity id or audience key; another would split them over two
    /// partitions), becomes a dead letter.
    mutating func accept<Value>(
        _ topic: InternalTopic, _ record: Record, what: String, now: UnixTime,
        parse: ([UInt8]) throws(FieldError) -> Value, key: (Value) -> (String, ActivityID?)
    ) -> Acceptance<Value> {
        if restore.buffer(topic, record) { return .handled([]) }
        guard (try? trackers.read(Self.trackerPartition(topic, partition), offset: record.offset)) != nil else { return .handled([]) }
        let value: Value
        do {
            value = try parse(record.value ?? [])
        } catch {
            let reason: DeadLetterReason = error.field.isEmpty ? .invalidJSON : .invalidCommand
            let problem = record.value == nil ? "empty record (tombstone)" : error.description
            return .handled(deadLetterRecord(topic, record, reason: reason, message: "\(what) at offset \(record.offset): \(problem)", activityID: nil, now: now))
        }
        let (expected, activityID) = key(value)
        if let given = record.keyText, given != expected {
            let field = activityID?.rawValue == expected ? "activity_id" : "audience"
            return .handled(deadLetterRecord(
                topic, record, reason: .invalidCommand,
                message: "record key \(given.debugDescription) is not the \(field) \(expected.debugDescription); \(topic.rawValue) records must be keyed by \(field == "audience" ? "audience key" : "activity id")",
                activityID: activityID, now: now))
        }
        return .ready(value)
    }

    /// A record of this partition of `tokens`.
    public mutating func tokenRecord(_ record: Record, now: UnixTime) -> [Action] {
        let actions = applyTokenRecord(record, now: now)
        return actions + publishCaughtUp(restore.read(tokenOffset: record.offset), now: now)
    }

    private mutating func applyTokenRecord(_ record: Record, now: UnixTime) -> [Action] {
        let registration: TokenRegistration
        let keyOf: (TokenRecord) -> (String, ActivityID?) = { parsed in
            switch parsed {
            case .update(let registration): (registration.activityID.rawValue, registration.activityID)
            case .pushToStart(let registration): (registration.audience.rawValue, nil)
            }
        }
        let apps = configuration.apps
        let parse = { (bytes: [UInt8]) throws(FieldError) in try TokenRecord(bytes: bytes, apps: apps) }
        switch accept(.tokens, record, what: "token registration", now: now, parse: parse, key: keyOf) {
        case .ready(.update(let value)): registration = value
        case .ready(.pushToStart(let value)):
            // A push-to-start token of a type the rules do not declare would never be started.
            if value.action == .register, let problem = coalescer.types.undeclaredProblem(value.attributesType) {
                return deadLetterRecord(
                    .tokens, record, reason: .attributesMismatch, message: "push-to-start registration at offset \(record.offset): \(problem)",
                    activityID: nil, details: ["path": .string(problem.field), "problem": .string(problem.message)], now: now)
            }
            return pushToStartRecord(value, offset: record.offset, now: now)
        case .handled(let actions): return actions
        }
        let activity = registration.activityID
        let stored = AckEffect.completeOffsets(.tokens, [record.offset])
        switch registration.action {
        case .register where !registration.isExpired(at: now):
            // While catching up, a new token is taken to hold what was pushed, not the replay.
            let holds = restore.pushedState(of: activity, current: coalescer.state(of: activity))
            let (record, fanOutActions) = activities.register(registration, state: holds, now: now, catchingUp: restore.isCatchingUp)
            let write = writes.produce(.tokenStore, key: record.storeKey, value: record.json.serialized(), then: stored)
            return [write] + perform(fanOutActions, for: .activity(activity), now: now)
        case .register, .unregister:
            let tombstone = writes.produce(.tokenStore, key: registration.storeKey, value: nil, then: stored)
            return perform(activities.unregister(activity, registration.token), for: .activity(activity), now: now) + [tombstone]
        }
    }

    // MARK: Timers and outcomes

    /// When the owner must call ``timerFired(now:)`` next: the earliest
    /// flush deadline, retry or sweep; nil while restoring with nothing due.
    public var nextDeadline: UnixTime? {
        mutating get {
            func earlier(_ first: UnixTime?, _ second: UnixTime?) -> UnixTime? {
                guard let first, let second else { return first ?? second }
                return min(first, second)
            }
            return earlier(earlier(wakes.next, restore.deadline), nextSweep)
        }
    }

    /// Runs everything due at `now`: held updates whose window closed,
    /// retries whose backoff ended, and the expiry sweep when it is time.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for wake in wakes.popDue(now: now) {
            switch wake {
            case .flush(let activity): actions += flushTimer(for: activity, now: now)
            case .retry(let sender):
                let fanOutActions = withFanOut(sender) { $0.timerFired(now: now) }
                if let fanOutActions { actions += perform(fanOutActions, for: sender, now: now) }
            case .retryChannel(let activity): actions += channelRetryTimer(for: activity)
            }
        }
        actions += publishCaughtUp(restore.timerFired(now: now), now: now)
        if let sweepAt = nextSweep, sweepAt <= now {
            nextSweep = now + configuration.sweepInterval
            actions += sweep(now: now)
        }
        return actions
    }

    private mutating func flushTimer(for activity: ActivityID, now: UnixTime) -> [Action] {
        switch coalescer.timerFired(for: activity, now: now) {
        case .none: return []
        case .reschedule(let at):
            wakes.schedule(.flush(activity), at: at)
            return []
        case .flush(let flush): return publish(flush, now: now)
        }
    }

    /// A send ended. `jitter` in [0, 1) randomizes the retry backoff.
    public mutating func sendCompleted(
        _ send: Send, outcome: FanOut.Outcome, now: UnixTime, jitter: Double
    ) -> [Action] {
        sendBudget.ended()
        return sendEnded(send, outcome: outcome, now: now, jitter: jitter) + serveWaitingSenders(now: now)
    }

    /// Kafka acknowledged the produce with this ticket.
    public mutating func acknowledged(_ ticket: UInt64, now: UnixTime) -> [Action] {
        guard let effect = writes.acknowledged(ticket) else { return [] }
        switch effect {
        case .completeOffsets(let topic, let offsets): return complete(topic, offsets)
        case .snapshot(_, let offsets): return complete(.commands, offsets)
        case .awaitedBy(let sender): return writeAcknowledged(by: sender, now: now)
        case .startRecorded(let offset, let token): return startRecorded(offset, token, now: now)
        case .nothing: return []
        }
    }

    /// Runs the lifecycle's sweep (activities dismissed, expired past
    /// `activity.max_age`, markers forgotten) and expires tokens past
    /// `expires_at` (or with no activity state for `max_age`).
    public mutating func sweep(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for step in lifecycle.due(now: now, isIdle: isQuiet) {
            switch step {
            case .expire(let activity):
                lifecycle.forget(activity)
                actions.append(.observe(.activityExpired(activity, reason: ActivityLifecycle.ExpiryReason.maxAge.rawValue)))
                actions += drop(activity, state: .tombstone)
            case .dismiss(let activity):
                guard let state = coalescer.state(of: activity) else {
                    lifecycle.forget(activity)
                    continue
                }
                let marker = lifecycle.dismiss(state, now: now)
                actions.append(.observe(.activityExpired(activity, reason: ActivityLifecycle.ExpiryReason.dismissed.rawValue)))
                actions += drop(activity, state: .write(ActivityState(marker: marker, of: activity, createdAt: state.createdAt)))
            case .forget(let activity):
                lifecycle.forget(activity)
                actions.append(writes.produce(.state, key: activity.rawValue, value: nil, then: .nothing))
            }
        }
        for (activity, tokens) in activities.expiredTokens(now: now, hasState: { coalescer.state(of: $0) != nil }) {
            for token in tokens {
                actions += perform(activities.unregister(activity, token), for: .activity(activity), now: now)
                actions.append(writes.produce(.tokenStore, key: TokenRegistration.storeKey(activity, token), value: nil, then: .nothing))
            }
            activities.dropIfAbandoned(activity, hasState: coalescer.state(of: activity) != nil)
        }
        for key in audienceStarts.sweep(now: now) {
            actions.append(writes.produce(.tokenStore, key: key, value: nil, then: .nothing))
        }
        return actions
    }

    /// Whether nothing of the activity is held, in flight, waiting for a
    /// retry or an acknowledgement: it may be dropped.
    private func isQuiet(_ activity: ActivityID) -> Bool {
        // A channel still being created holds its pushes; dropping the
        // activity deletes the channel once APNs names it.
        !coalescer.isHolding(activity) && activities.isIdle(activity) && !restore.holds(activity)
    }

    /// What becomes of a dropped activity's `state` record.
    enum DroppedState {
        /// Left as it is (a new life writes its own).
        case keep
        case tombstone
        /// Replaced by this (a dismissed activity's marker).
        case write(ActivityState)
    }

    /// Drops an activity's state and update tokens (tombstones in
    /// `token-store`), its channel, and completes the offsets it held.
    mutating func drop(_ activity: ActivityID, state: DroppedState) -> [Action] {
        var actions: [Action] = []
        let held = coalescer.remove(activity)
        restore.forget(activity)
        let (tokens, deliveryOffsets) = activities.expire(activity)
        switch state {
        case .keep: break
        case .tombstone: actions.append(writes.produce(.state, key: activity.rawValue, value: nil, then: .nothing))
        case .write(let marker): actions.append(writes.produce(.state, key: activity.rawValue, value: marker.json.serialized(), then: .nothing))
        }
        for token in tokens {
            actions.append(writes.produce(.tokenStore, key: TokenRegistration.storeKey(activity, token), value: nil, then: .nothing))
        }
        let (channelActions, channelHeld) = channelExpired(activity)
        actions += channelActions
        return actions + complete(.commands, (held + channelHeld + deliveryOffsets).sorted())
    }

    /// Flushes every held update now (graceful shutdown).
    public mutating func drain(now: UnixTime) -> [Action] {
        publishCaughtUp(restore.release(), now: now) + coalescer.flushAll(now: now).flatMap { publish($0, now: now) }
    }

    /// Whether nothing is held, in flight or unacknowledged.
    public var isIdle: Bool {
        trackers.outstanding == 0 && writes.isEmpty && coalescer.heldActivities.isEmpty && restore.holdsNothing
            && activities.isIdle && audienceStarts.isIdle && !channels.isCreatingAny
    }

    // MARK: Internals

    mutating func complete(_ topic: InternalTopic, _ offsets: [Int64]) -> [Action] {
        let tracked = Self.trackerPartition(topic, partition)
        var commit: OffsetTracker.Commit?
        for offset in offsets {
            if let moved = try? trackers.complete(tracked, offset: offset) { commit = moved }
        }
        guard let commit else { return [] }
        return [.commit(topic, offset: commit.offset)]
    }

    mutating func deadLetterRecord(
        _ topic: InternalTopic, _ record: Record, reason: DeadLetterReason, message: String, activityID: ActivityID?,
        details: [String: JSONValue] = [:], now: UnixTime
    ) -> [Action] {
        let letter = DeadLetter(
            reason: reason, message: message, activityID: activityID,
            origin: .init(topic: configuration.topic(topic), partition: partition, offset: record.offset, key: record.keyText, valueBytes: record.value),
            details: details, deadLetteredAt: now)
        return writes.deadLetter(letter, key: record.keyText ?? activityID?.rawValue ?? "", then: .completeOffsets(topic, [record.offset]))
    }

    /// Sends a flush, unless the catch-up or the activity's channel holds it.
    mutating func publish(_ flush: Coalescer.Flush, now: UnixTime) -> [Action] {
        if restore.hold(flush) || channels.hold(flush) { return [] }
        let activity = flush.push.activityID
        let (actions, fanOutActions) = activities.publish(flush, version: coalescer.version(of: activity), now: now, writes: &writes)
        guard let fanOutActions else { return actions }
        return actions + perform(fanOutActions, for: .activity(activity), now: now)
    }

    private mutating func publish(_ flushes: [Coalescer.Flush], now: UnixTime) -> [Action] {
        flushes.flatMap { publish($0, now: now) }
    }
}
