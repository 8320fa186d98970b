/// Everything the dispatcher decides for one partition number of the
/// co-partitioned `commands`, `tokens`, `starts`, `state` and `token-store`
/// topics: restore, then token registrations and commands in offset order
/// through the ``Coalescer``, one ``FanOut`` per activity, audience starts
/// to push-to-start tokens (see `PartitionDispatcher+PushToStart.swift`),
/// and three ``OffsetTracker`` partitions. A value type: inputs are `mutating func`s returning
/// ``Action``s; the worker's dispatcher service performs them (sends,
/// produces, commits) and reports back.
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
    /// What one partition's machine needs to know of the configuration.
    public struct Configuration: Sendable, Hashable {
        public var coalescer: Coalescer.Configuration
        public var fanOut: FanOut.Configuration
        /// The environment of a token whose registration names none.
        public var defaultEnvironment: APNsEnvironment
        /// Prefix of the internal topics' names (dead letters name their origin).
        public var topicPrefix: String
        /// Seconds between expiry sweeps of activities and tokens.
        /// Longest a new owner holds its pushes while it reads the commands
        /// its previous owner may have pushed (see ``holdPushes(untilCommandOffset:)``).
        public var catchUpLimit: Double
        public var sweepInterval: Double
        /// The budget of starts per push-to-start token.
        public var pushToStart: PushToStartBudget.Configuration
        /// The deployment's apps: records naming another are dead-lettered.
        public var apps: AppDirectory
        /// Sends in flight at once for the whole partition, shared in turn
        /// by its activities and audience starts (until ``PartitionDispatcher/setSendLimit(_:now:)``
        /// changes it): a worker's share of its worker-wide limit.
        public var maxInFlight: Int

        public init(
            coalescer: Coalescer.Configuration = .init(), fanOut: FanOut.Configuration = .init(),
            defaultEnvironment: APNsEnvironment = .production, topicPrefix: String = "livedispatch.",
            sweepInterval: Double = 5, pushToStart: PushToStartBudget.Configuration = .init(), catchUpLimit: Double = 30,
            apps: AppDirectory = .unchecked, maxInFlight: Int = .max
        ) {
            self.apps = apps
            self.maxInFlight = max(1, maxInFlight)
            self.coalescer = coalescer
            self.fanOut = fanOut
            self.defaultEnvironment = defaultEnvironment
            self.topicPrefix = topicPrefix
            self.sweepInterval = max(0.001, sweepInterval)
            self.catchUpLimit = max(0, catchUpLimit)
            self.pushToStart = pushToStart
        }

        /// Full name of an internal topic.
        public func topic(_ name: InternalTopic) -> String { topicPrefix + name.rawValue }
    }

    /// A record written by the dispatcher; `ticket` comes back in
    /// ``acknowledged(_:now:)`` once Kafka has it.
    public struct Produce: Sendable, Hashable {
        public var topic: InternalTopic
        public var key: String
        /// nil writes a tombstone.
        public var value: [UInt8]?
        /// The partition for co-partitioned topics; nil lets the producer
        /// choose by key (dead letters).
        public var partition: Int32?
        public var ticket: UInt64

        public init(topic: InternalTopic, key: String, value: [UInt8]?, partition: Int32?, ticket: UInt64) {
            self.topic = topic
            self.key = key
            self.value = value
            self.partition = partition
            self.ticket = ticket
        }
    }

    /// One push to one device.
    public struct Send: Sendable, Hashable {
        public var activityID: ActivityID
        public var token: DeviceToken
        public var environment: APNsEnvironment
        /// The app the token belongs to: its key, bundle id and hosts; nil
        /// for the only app.
        public var app: String?
        public var push: LiveActivityPush
        /// The encoded payload, checked against APNs' size limit; one
        /// buffer shared by every send of the same version.
        public var payload: [UInt8]
        /// For a start to a push-to-start token: the offset of the
        /// audience start on `starts` it was made for.
        public var audienceStart: Int64?
        /// For a broadcast: the activity's channel (`token` is then the
        /// fan-out's stand-in for it, never sent).
        public var channel: ActivityChannel?

        public init(
            activityID: ActivityID, token: DeviceToken, environment: APNsEnvironment, app: String? = nil, push: LiveActivityPush,
            payload: [UInt8], audienceStart: Int64? = nil, channel: ActivityChannel? = nil
        ) {
            self.app = app
            self.activityID = activityID
            self.token = token
            self.environment = environment
            self.push = push
            self.payload = payload
            self.audienceStart = audienceStart
            self.channel = channel
        }
    }

    public enum Action: Sendable, Hashable {
        case send(Send)
        case produce(Produce)
        /// Store this offset (the next to read) for the topic's partition and commit it.
        case commit(InternalTopic, offset: Int64)
        /// Something worth counting or showing happened; no I/O needed.
        case observe(Observation)
        /// Create or delete a broadcast channel and report back.
        case channel(ChannelRequest)
    }

    /// What the dispatcher reports for metrics, logs and the demo's output.
    public enum Observation: Sendable, Hashable {
        /// A push reached every token (or they were pruned or dead-lettered):
        /// the state now on the devices, how many commands it merged, how
        /// many tokens the activity has and the first few of them.
        case pushCompleted(ActivityState, commands: Int, tokens: Int, sample: [DeviceToken])
        case deadLettered(DeadLetter)
        case tokenRemoved(ActivityID, DeviceToken, reason: String)
        case activityExpired(ActivityID, reason: String)
        /// A command whose id was applied before was acknowledged, not applied.
        case duplicateCommand(ActivityID, commandID: String)
        /// The priority budget sent this version at a lower priority than asked.
        case priorityDowngraded(ActivityID, version: UInt64, from: PushPriority, to: PushPriority)
        /// An audience start is done: the push-to-start tokens it was
        /// delivered to, and how many were skipped as already started.
        case audienceStarted(ActivityID, audience: AudienceKey, delivered: [DeviceToken], alreadyStarted: Int)
        /// A broadcast activity's channel was created.
        case channelCreated(ActivityID, ActivityChannel)
        /// An expired broadcast activity's channel was deleted.
        case channelDeleted(ActivityID, channelID: String)
    }

    /// A record as read from `commands`, `tokens` or `starts`.
    public struct Record: Sendable, Hashable {
        public var offset: Int64
        public var key: [UInt8]?
        public var value: [UInt8]?
        public var timestamp: UnixTime

        public init(offset: Int64, key: [UInt8]?, value: [UInt8]?, timestamp: UnixTime) {
            self.offset = offset
            self.key = key
            self.value = value
            self.timestamp = timestamp
        }

        public var keyText: String? { key.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// What an acknowledged produce finishes.
    enum AckEffect: Sendable, Hashable {
        case completeOffsets(InternalTopic, [Int64])
        case deadLetterForActivity(ActivityID)
        case snapshot(ActivityID, offsets: [Int64])
        /// A push-to-start token's ledger, recording the start of the
        /// audience start at this offset, is stored: the start may be sent.
        case startRecorded(Int64, DeviceToken)
        /// A dead letter or tombstone of the audience start at this offset.
        case audienceStartWrite(Int64)
        case nothing
    }

    /// What the machine keeps of a registration: a few words per token (the
    /// activity and token are the keys it is stored under).
    struct RegisteredToken: Sendable, Hashable, Expiring {
        // Six machine words (48 bytes): the dates without optional tags.
        private var expires: CompactUnixTime
        private var registered: CompactUnixTime
        /// What the token's `token-store` record says of its last push.
        var recorded: RecordedOutcome = .clear
        var app: String?
        var environment: APNsEnvironment

        init(environment: APNsEnvironment, expiresAt: UnixTime?, registeredAt: UnixTime?, app: String?) {
            self.environment = environment
            self.expires = CompactUnixTime(expiresAt)
            self.registered = CompactUnixTime(registeredAt)
            self.app = app
        }

        var expiresAt: UnixTime? {
            get { expires.value }
            set { expires = CompactUnixTime(newValue) }
        }

        var registeredAt: UnixTime? {
            get { registered.value }
            set { registered = CompactUnixTime(newValue) }
        }

        init(_ registration: TokenRegistration) {
            self.init(
                environment: registration.environment, expiresAt: registration.expiresAt, registeredAt: registration.registeredAt,
                app: registration.app)
            if let outcome = registration.lastOutcome, outcome.result == .failed { recorded = .failed(outcome) }
        }

        /// The token's `token-store` record with `outcome` as its last.
        func registration(_ activity: ActivityID, _ token: DeviceToken, outcome: TokenOutcome?) -> TokenRegistration {
            TokenRegistration(
                activityID: activity, token: token, environment: environment, expiresAt: expiresAt, registeredAt: registeredAt,
                lastOutcome: outcome)
        }
    }

    /// Whether a token's record names a failure. Only failures and the
    /// delivery after one are written, so the write load follows failures,
    /// not pushes; the failure is boxed so healthy tokens stay a few words.
    enum RecordedOutcome: Sendable, Hashable {
        /// No failure: the token got every push that completed since it registered.
        case clear
        /// The record names this failure; the token's next delivery clears it.
        indirect case failed(TokenOutcome)
    }

    struct ActivityDelivery: Sendable {
        var fanOut: FanOut
        /// Flushes published and not yet complete, oldest first.
        var flushes: [Coalescer.Flush] = []
        /// Dead letters and token tombstones not yet acknowledged; a
        /// completed flush waits for them before its snapshot is written.
        var pendingAcks = 0
        /// Versions never fanned out (their payload was too large): complete
        /// as soon as every version before them is.
        var skipped: Set<UInt64> = []
        /// The payloads of the newest version sent, encoded once for all its
        /// tokens: the version as flushed and, for tokens still owed their
        /// start, the same version as a start.
        var payloads: [ActivityEvent: (version: UInt64, bytes: [UInt8])] = [:]
        /// Sends that ended for good, by version, until their push completes.
        var counts: [UInt64: PushSummary.Counts] = [:]
    }

    /// What a wake-up is for.
    enum Wake: Hashable, Sendable {
        case flush(ActivityID)
        case retry(ActivityID)
        /// A retry of the audience start at this offset.
        case retryStart(Int64)
        /// A retry of creating the activity's broadcast channel.
        case retryChannel(ActivityID)
    }

    public let partition: Int32
    public let configuration: Configuration
    private var coalescer: Coalescer
    var wakes = DeadlineQueue<Wake>()
    private var nextSweep: UnixTime?
    var deliveries: [ActivityID: ActivityDelivery] = [:]
    private var registrations: [ActivityID: TokenTable<RegisteredToken>] = [:]
    /// Push-to-start tokens by audience, then token.
    var audiences: [AudienceKey: [DeviceToken: PushToStartToken]] = [:]
    var budget: PushToStartBudget
    /// Audience starts being sent, by their offset on `starts`.
    var audienceDeliveries: [Int64: AudienceDelivery] = [:]
    /// Broadcast activities' channels (see `PartitionDispatcher+Channels.swift`).
    var channels: [ActivityID: ChannelSlot] = [:]
    /// The newest completed pushes of each activity, written in its snapshots.
    private var pushHistory: [ActivityID: [PushSummary]] = [:]
    private var trackers = OffsetTracker()
    private var acks: [UInt64: AckEffect] = [:]
    private var nextTicket: UInt64 = 1
    private var restoring = true
    /// Pushes held while the partition replays what its previous owner read.
    private var catchUp: CatchUp?

    /// A new owner's replay of `commands` up to the partition's end at
    /// assignment: the previous owner may have pushed any state up to there,
    /// so pushing an intermediate state of the replay could send a device a
    /// state older than one it shows (semantic 2). Each activity's flushes
    /// are merged here and pushed once the replay is read.
    struct CatchUp: Sendable {
        var end: Int64
        var deadline: UnixTime?
        var held: [ActivityID: Coalescer.Flush] = [:]
    }
    private var restoredStates: [ActivityState] = []
    /// Records that arrived before the restore finished, replayed after it.
    private var early: [(InternalTopic, Record)] = []
    /// The partition's send budget (see `PartitionDispatcher+SendBudget.swift`).
    var sendBudget: SendBudget

    public init(partition: Int32, configuration: Configuration) {
        self.partition = partition
        self.configuration = configuration
        self.coalescer = Coalescer(configuration: configuration.coalescer)
        self.budget = PushToStartBudget(configuration: configuration.pushToStart)
        self.sendBudget = SendBudget(limit: configuration.maxInFlight)
        trackers.assign(Self.trackerPartition(.commands, partition))
        trackers.assign(Self.trackerPartition(.tokens, partition))
        trackers.assign(Self.trackerPartition(.starts, partition))
    }

    static func trackerPartition(_ topic: InternalTopic, _ number: Int32) -> OffsetTracker.Partition {
        OffsetTracker.Partition(topic: topic.rawValue, number: number)
    }

    /// Records read and not yet fully handled: the back-pressure measure.
    public var outstanding: Int { trackers.outstanding }
    public var isReady: Bool { !restoring }
    public var activityCount: Int { coalescer.activityCount }
    public func state(of activityID: ActivityID) -> ActivityState? { coalescer.state(of: activityID) }
    public func pushes(of activityID: ActivityID) -> [PushSummary] { pushHistory[activityID] ?? [] }
    public func tokens(of activityID: ActivityID) -> [DeviceToken] {
        registrations[activityID].map { $0.tokens.sorted() } ?? []
    }

    // MARK: Restore

    /// A snapshot read back from `state`; a tombstone (nil) removes it.
    public mutating func restoreState(key: String, value: [UInt8]?) {
        guard let value else {
            restoredStates.removeAll { $0.activityID.rawValue == key }
            if let activity = try? ActivityID(key) {
                pushHistory.removeValue(forKey: activity)
                channels.removeValue(forKey: activity)
            }
            return
        }
        guard let json = try? FieldReader.parse(value), let snapshot = try? ActivityState(json: json) else { return }
        restoredStates.removeAll { $0.activityID == snapshot.activityID }
        restoredStates.append(snapshot)
        pushHistory[snapshot.activityID] = PushSummary.history(of: json)
        channels[snapshot.activityID] = ActivityChannel.inSnapshot(json).map(ChannelSlot.ready)
    }

    /// A registration read back from `token-store`; a tombstone removes it.
    public mutating func restoreToken(key: String, value: [UInt8]?) {
        restoreToken(key: Array(key.utf8), value: value)
    }

    /// ``restoreToken(key:value:)`` with the record's key as it came: a
    /// registration's key is only read for a tombstone.
    public mutating func restoreToken(key: [UInt8], value: [UInt8]?) {
        if key.contains(0x1E) {
            restorePushToStartToken(key: String(decoding: key, as: UTF8.self), value: value)
            return
        }
        guard let value else {
            if let separator = key.firstIndex(of: 0x1F),
                let activity = try? ActivityID(String(decoding: key[..<separator], as: UTF8.self)),
                let token = try? DeviceToken(hex: String(decoding: key[(separator + 1)...], as: UTF8.self))
            {
                registrations[activity]?.remove(token)
                if registrations[activity]?.isEmpty == true { registrations.removeValue(forKey: activity) }
            }
            return
        }
        guard var registration = try? TokenRegistration(bytes: value), registration.action == .register else { return }
        registration.app = configuration.apps.restored(registration.app)
        registrations[registration.activityID, default: TokenTable()].insert(registration.token, RegisteredToken(registration))
    }

    /// The changelogs are read to their end: install them and replay any
    /// records that arrived meanwhile.
    public mutating func finishRestore(now: UnixTime) -> [Action] {
        guard restoring else { return [] }
        catchUp?.deadline = now + configuration.catchUpLimit
        for snapshot in restoredStates { coalescer.restore(snapshot) }
        for (activity, tokens) in registrations {
            var fanOut = makeFanOut(activity)
            if let snapshot = coalescer.state(of: activity), snapshot.version > 0 {
                fanOut.restoreLatest(Self.restoredPush(snapshot, configuration: configuration))
            }
            fanOut.restoreTokens(tokens.tokens)
            deliveries[activity] = ActivityDelivery(fanOut: fanOut)
        }
        installRestoredChannels(now: now)
        restoredStates = []
        restoring = false
        nextSweep = now + configuration.sweepInterval
        var actions: [Action] = []
        let replay = early
        early = []
        for (topic, record) in replay {
            switch topic {
            case .commands: actions += command(record, now: now)
            case .tokens: actions += tokenRecord(record, now: now)
            case .starts: actions += audienceStartRecord(record, now: now)
            case .state, .tokenStore, .deadLetters, .channels: break
            }
        }
        return actions
    }

    /// The push a restored state stands for: what its tokens already hold.
    static func restoredPush(_ state: ActivityState, configuration: Configuration) -> LiveActivityPush {
        LiveActivityPush(
            activityID: state.activityID, version: state.version, event: state.isEnded ? .end : .update,
            contentState: state.contentState, timestamp: state.timestamp ?? state.createdAt,
            priority: configuration.coalescer.defaultPriority, staleDate: state.staleDate,
            dismissalDate: state.isEnded ? state.dismissalDate : nil, relevanceScore: state.relevanceScore)
    }

    func makeFanOut(_ activity: ActivityID) -> FanOut {
        makeFanOut(activity, version: coalescer.state(of: activity)?.version ?? 0)
    }

    /// A fan-out that starts sends only when the partition's budget gives
    /// it some (``continueSending(_:now:)``).
    func makeFanOut(_ activity: ActivityID, version: UInt64) -> FanOut {
        var fanOut = FanOut(activityID: activity, version: version, configuration: configuration.fanOut)
        fanOut.allowance = 0
        return fanOut
    }

    // MARK: Records

    /// A record of this partition of `commands`.
    public mutating func command(_ record: Record, now: UnixTime) -> [Action] {
        var actions = applyCommand(record, now: now)
        if !restoring, let end = catchUp?.end, record.offset >= end - 1 {
            actions += releaseHeldPushes(now: now)
        }
        return actions
    }

    /// While restoring: hold every push until the `commands` record before
    /// `end` (the partition's end offset when it was assigned) has been read,
    /// or `catchUpLimit` seconds after the restore, then push each activity's
    /// newest state once. An empty partition (`end` 0) holds nothing.
    public mutating func holdPushes(untilCommandOffset end: Int64) {
        guard restoring, end > 0 else { return }
        catchUp = CatchUp(end: end)
    }

    /// Whether pushes are held for the replay of the previous owner's commands.
    public var isCatchingUp: Bool { catchUp != nil }

    private mutating func releaseHeldPushes(now: UnixTime) -> [Action] {
        guard let hold = catchUp else { return [] }
        catchUp = nil
        return hold.held.sorted { $0.key < $1.key }.flatMap { publish($0.value, now: now) }
    }

    /// Two flushes of one activity held during a catch-up as one: the newer
    /// state with every offset, a start if either was one (devices that
    /// missed it need it), the latest alert and the highest priority.
    static func merged(_ older: Coalescer.Flush, _ newer: Coalescer.Flush) -> Coalescer.Flush {
        var flush = newer
        flush.offsets = older.offsets + newer.offsets
        if older.push.event == .start, newer.push.event == .update {
            flush.push = newer.push.asStart
            flush.push.inputPushToken = older.push.inputPushToken
            flush.push.inputPushChannel = older.push.inputPushChannel
        }
        flush.push.alert = newer.push.alert ?? older.push.alert
        flush.push.priority = max(newer.push.priority, older.push.priority)
        return flush
    }

    private mutating func applyCommand(_ record: Record, now: UnixTime) -> [Action] {
        let parsed: ActivityCommand
        let apps = configuration.apps
        let parse = { (bytes: [UInt8]) throws(FieldError) in try ActivityCommand(bytes: bytes, apps: apps) }
        switch accept(.commands, record, what: "command", now: now, parse: parse, key: { ($0.activityID.rawValue, $0.activityID) }) {
        case .ready(let command): parsed = command
        case .handled(let actions): return actions
        }
        switch coalescer.receive(parsed, offset: record.offset, recordTime: record.timestamp, now: now) {
        case .alreadyApplied:
            return complete(.commands, [record.offset])
        case .duplicate(let commandID):
            return [.observe(.duplicateCommand(parsed.activityID, commandID: commandID))] + complete(.commands, [record.offset])
        case .reject(let reason, let message, let details):
            return deadLetterRecord(.commands, record, reason: reason, message: message, activityID: parsed.activityID, details: details, now: now)
        case .scheduleFlush(let at):
            wakes.schedule(.flush(parsed.activityID), at: at)
            return beginChannel(for: parsed)
        case .flush(var flush):
            let channelActions = beginChannel(for: parsed)
            guard parsed.event == .start, !parsed.audiences.isEmpty else { return channelActions + publish(flush, now: now) }
            let actions = channelActions + startAudiencesWithChannel(parsed.audiences, flush.push, app: flush.snapshot.app)
            // The devices started through their push-to-start tokens hold the
            // activity: its update tokens are sent the state as an update.
            flush.push.event = .update
            flush.push.alert = nil
            return actions + publish(flush, now: now)
        }
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
        if restoring {
            early.append((topic, record))
            return .handled([])
        }
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
        var registration: TokenRegistration
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
        case .ready(.pushToStart(let value)): return pushToStartRecord(value, offset: record.offset, now: now)
        case .handled(let actions): return actions
        }
        let activity = registration.activityID
        let ticket = issueTicket(.completeOffsets(.tokens, [record.offset]))
        var actions: [Action] = []
        switch registration.action {
        case .register where !registration.isExpired(at: now):
            registration.registeredAt = registration.registeredAt ?? now
            // Outcomes are the worker's own; a failure already recorded is kept.
            registration.lastOutcome = nil
            if case .failed(let outcome)? = registrations[activity]?[registration.token]?.recorded { registration.lastOutcome = outcome }
            registrations[activity, default: TokenTable()].insert(registration.token, RegisteredToken(registration))
            var delivery = deliveries.removeValue(forKey: activity) ?? ActivityDelivery(fanOut: makeFanOut(activity))
            if delivery.fanOut.latest == nil, let state = coalescer.state(of: activity), state.version > 0 {
                delivery.fanOut.restoreLatest(Self.restoredPush(state, configuration: configuration))
            }
            let fanOutActions = delivery.fanOut.addToken(registration.token, sendCurrent: true, now: now)
            deliveries[activity] = delivery
            actions.append(.produce(Produce(topic: .tokenStore, key: registration.storeKey, value: registration.json.serialized(), partition: partition, ticket: ticket)))
            actions += perform(fanOutActions, for: activity, now: now)
        case .register, .unregister:
            registrations[activity]?.remove(registration.token)
            if registrations[activity]?.isEmpty == true { registrations.removeValue(forKey: activity) }
            if var delivery = deliveries.removeValue(forKey: activity) {
                let fanOutActions = delivery.fanOut.removeToken(registration.token)
                deliveries[activity] = delivery
                actions += perform(fanOutActions, for: activity, now: now)
            }
            actions.append(.produce(Produce(topic: .tokenStore, key: registration.storeKey, value: nil, partition: partition, ticket: ticket)))
        }
        return actions
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
            return earlier(earlier(wakes.next, catchUp?.deadline), nextSweep)
        }
    }

    /// Runs everything due at `now`: held updates whose window closed,
    /// retries whose backoff ended, and the expiry sweep when it is time.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for wake in wakes.popDue(now: now) {
            switch wake {
            case .flush(let activity): actions += flushTimer(for: activity, now: now)
            case .retry(let activity): actions += retryTimer(for: activity, now: now)
            case .retryStart(let offset): actions += audienceStartTimer(offset, now: now)
            case .retryChannel(let activity): actions += channelRetryTimer(for: activity)
            }
        }
        if let deadline = catchUp?.deadline, deadline <= now {
            actions += releaseHeldPushes(now: now)
        }
        if let sweepAt = nextSweep, sweepAt <= now {
            nextSweep = now + configuration.sweepInterval
            actions += sweep(now: now)
        }
        return actions
    }

    mutating func flushTimer(for activity: ActivityID, now: UnixTime) -> [Action] {
        switch coalescer.timerFired(for: activity, now: now) {
        case .none: return []
        case .reschedule(let at):
            wakes.schedule(.flush(activity), at: at)
            return []
        case .flush(let flush): return publish(flush, now: now)
        }
    }

    mutating func retryTimer(for activity: ActivityID, now: UnixTime) -> [Action] {
        guard var delivery = deliveries.removeValue(forKey: activity) else { return [] }
        let fanOutActions = delivery.fanOut.timerFired(now: now)
        deliveries[activity] = delivery
        return perform(fanOutActions, for: activity, now: now)
    }

    /// A send ended. `jitter` in [0, 1) randomizes the retry backoff.
    public mutating func sendCompleted(
        _ send: Send, outcome: FanOut.Outcome, now: UnixTime, jitter: Double
    ) -> [Action] {
        sendBudget.ended()
        return sendEnded(send, outcome: outcome, now: now, jitter: jitter) + serveWaitingSenders(now: now)
    }

    private mutating func sendEnded(
        _ send: Send, outcome: FanOut.Outcome, now: UnixTime, jitter: Double
    ) -> [Action] {
        if let offset = send.audienceStart {
            return audienceStartSent(offset, send, outcome: outcome, now: now, jitter: jitter)
        }
        guard var delivery = deliveries.removeValue(forKey: send.activityID) else { return [] }
        let fanOutActions = delivery.fanOut.completed(token: send.token, version: send.push.version, outcome: outcome, now: now, jitter: jitter)
        var recordActions: [Action] = []
        switch outcome {
        case .delivered:
            delivery.counts[send.push.version, default: .init()].delivered()
            if case .failed? = registrations[send.activityID]?[send.token]?.recorded {
                let delivered = TokenOutcome(result: .delivered, version: send.push.version, event: send.push.event, at: now)
                recordActions = record(delivered, of: send.token, in: send.activityID, delivery: &delivery)
            }
        case .tokenInvalid(let reason), .permanent(let reason):
            delivery.counts[send.push.version, default: .init()].failed(reason)
        case .retryable(let reason, _):
            let gaveUp = fanOutActions.contains {
                if case .deadLetter(send.token, _, .retriesExhausted, _, _) = $0 { true } else { false }
            }
            if gaveUp { delivery.counts[send.push.version, default: .init()].failed(reason) }
        }
        deliveries[send.activityID] = delivery
        return recordActions + perform(fanOutActions, for: send.activityID, now: now)
    }

    /// Writes `outcome` in the token's `token-store` record; the activity's
    /// next snapshot waits for its ack, so a reader that sees the snapshot
    /// sees the outcome too.
    private mutating func record(
        _ outcome: TokenOutcome, of token: DeviceToken, in activity: ActivityID, delivery: inout ActivityDelivery
    ) -> [Action] {
        guard var registered = registrations[activity]?[token] else { return [] }
        registered.recorded = outcome.result == .failed ? .failed(outcome) : .clear
        registrations[activity]?[token] = registered
        delivery.pendingAcks += 1
        let record = registered.registration(activity, token, outcome: outcome)
        return [.produce(Produce(
            topic: .tokenStore, key: record.storeKey, value: record.json.serialized(), partition: partition,
            ticket: issueTicket(.deadLetterForActivity(activity))))]
    }

    /// Kafka acknowledged the produce with this ticket.
    public mutating func acknowledged(_ ticket: UInt64, now: UnixTime) -> [Action] {
        guard let effect = acks.removeValue(forKey: ticket) else { return [] }
        switch effect {
        case .completeOffsets(let topic, let offsets):
            return complete(topic, offsets)
        case .snapshot(_, let offsets):
            return complete(.commands, offsets)
        case .deadLetterForActivity(let activity):
            guard var delivery = deliveries.removeValue(forKey: activity) else { return [] }
            delivery.pendingAcks -= 1
            deliveries[activity] = delivery
            return delivery.pendingAcks == 0 ? finishCompletion(activity, now: now) : []
        case .startRecorded(let offset, let token):
            return startRecorded(offset, token, now: now)
        case .audienceStartWrite(let offset):
            audienceDeliveries[offset]?.pendingAcks -= 1
            return finishAudienceStart(offset)
        case .nothing:
            return []
        }
    }

    /// Expires activities past `activity.max_age` or their dismissal, and
    /// tokens past `expires_at` (or with no activity state for `max_age`):
    /// tombstones for their state and tokens.
    public mutating func sweep(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for expiry in coalescer.expire(now: now) {
            let activity = expiry.activityID
            actions.append(.observe(.activityExpired(activity, reason: expiry.reason.rawValue)))
            pushHistory.removeValue(forKey: activity)
            actions.append(.produce(Produce(topic: .state, key: activity.rawValue, value: nil, partition: partition, ticket: issueTicket(.nothing))))
            for token in (registrations.removeValue(forKey: activity)?.tokens ?? []).sorted() {
                actions.append(.produce(Produce(topic: .tokenStore, key: TokenRegistration.storeKey(activity, token), value: nil, partition: partition, ticket: issueTicket(.nothing))))
            }
            let (channelActions, channelHeld) = channelExpired(activity)
            actions += channelActions
            var offsets = expiry.heldOffsets + channelHeld
            if let delivery = deliveries.removeValue(forKey: activity) {
                offsets += delivery.flushes.flatMap(\.offsets)
            }
            actions += complete(.commands, offsets.sorted())
        }
        for (activity, tokens) in registrations {
            let hasState = coalescer.state(of: activity) != nil
            for (token, registration) in zip(tokens.tokens, tokens.values) {
                let orphaned = !hasState && (registration.registeredAt ?? now) + configuration.coalescer.maxAge <= now
                guard registration.isExpired(at: now) || orphaned else { continue }
                registrations[activity]?.remove(token)
                if var delivery = deliveries.removeValue(forKey: activity) {
                    let fanOutActions = delivery.fanOut.removeToken(token)
                    deliveries[activity] = delivery
                    actions += perform(fanOutActions, for: activity, now: now)
                }
                actions.append(.produce(Produce(topic: .tokenStore, key: TokenRegistration.storeKey(activity, token), value: nil, partition: partition, ticket: issueTicket(.nothing))))
            }
            if registrations[activity]?.isEmpty == true {
                registrations.removeValue(forKey: activity)
                if !hasState { deliveries.removeValue(forKey: activity) }
            }
        }
        return actions + sweepPushToStartTokens(now: now)
    }

    /// Flushes every held update now (graceful shutdown).
    public mutating func drain(now: UnixTime) -> [Action] {
        let held = coalescer.flushAll(now: now).flatMap { publish($0, now: now) }
        return held + releaseHeldPushes(now: now)
    }

    /// Whether nothing is held, in flight or unacknowledged.
    public var isIdle: Bool {
        trackers.outstanding == 0 && acks.isEmpty && coalescer.heldActivities.isEmpty && (catchUp?.held.isEmpty ?? true)
            && deliveries.values.allSatisfy { $0.fanOut.isIdle && $0.flushes.isEmpty } && audienceDeliveries.isEmpty
            && !isCreatingChannels
    }

    // MARK: Internals

    mutating func issueTicket(_ effect: AckEffect) -> UInt64 {
        let ticket = nextTicket
        nextTicket += 1
        acks[ticket] = effect
        return ticket
    }

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
        let ticket = issueTicket(.completeOffsets(topic, [record.offset]))
        return [
            .produce(Produce(topic: .deadLetters, key: record.keyText ?? activityID?.rawValue ?? "", value: letter.serialized(), partition: nil, ticket: ticket)),
            .observe(.deadLettered(letter)),
        ]
    }

    mutating func publish(_ flush: Coalescer.Flush, now: UnixTime) -> [Action] {
        let activity = flush.push.activityID
        if var hold = catchUp {
            hold.held[activity] = hold.held[activity].map { Self.merged($0, flush) } ?? flush
            catchUp = hold
            return []
        }
        if holdUntilChannel(flush) { return [] }
        var delivery = deliveries.removeValue(forKey: activity) ?? ActivityDelivery(fanOut: makeFanOut(activity))
        var actions: [Action] = []
        do throws(PayloadTooLargeError) {
            // Written once per version (by the coalescer's size check when
            // it could): every token's send shares it.
            let bytes = try APNsPayload.checked(flush.payload ?? APNsPayload.bytes(for: flush.push), of: activity)
            // Kept for the sends only when the fan-out takes this version
            // (it ignores one not newer than what its tokens have).
            if delivery.fanOut.takes(flush.push) {
                delivery.payloads[flush.push.event] = (flush.push.version, bytes)
            }
        } catch {
            let letter = DeadLetter(
                reason: .payloadTooLarge, message: error.description, activityID: activity,
                details: ["size": .integer(Int64(error.size)), "limit": .integer(Int64(error.limit)), "version": .integer(Int64(flush.push.version))],
                deadLetteredAt: now)
            delivery.pendingAcks += 1
            actions.append(.produce(Produce(topic: .deadLetters, key: activity.rawValue, value: letter.serialized(), partition: nil, ticket: issueTicket(.deadLetterForActivity(activity)))))
            actions.append(.observe(.deadLettered(letter)))
            // The state moved on even though no device can be sent it.
            delivery.flushes.append(flush)
            delivery.skipped.insert(flush.push.version)
            deliveries[activity] = delivery
            return actions
        }
        delivery.flushes.append(flush)
        if let requested = flush.push.downgradedFrom {
            actions.append(.observe(.priorityDowngraded(activity, version: flush.push.version, from: requested, to: flush.push.priority)))
        }
        let fanOutActions = delivery.fanOut.publish(flush.push, now: now)
        deliveries[activity] = delivery
        actions += perform(fanOutActions, for: activity, now: now)
        return actions
    }

    mutating func perform(_ fanOutActions: [FanOut.Action], for activity: ActivityID, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var pending = fanOutActions[...]
        while true {
            guard let action = pending.popFirst() else {
                // Sends the partition's budget lets start now, if tokens wait.
                let more = continueSending(.activity(activity), now: now)
                if more.isEmpty { break }
                pending.append(contentsOf: more)
                continue
            }
            switch action {
            case .send(DeviceToken.broadcastChannel, let push):
                let (send, settled) = broadcastSend(push, activity: activity, now: now)
                if let send {
                    sendBudget.started()
                    actions.append(.send(send))
                }
                pending.append(contentsOf: settled)
            case .send(let token, let push):
                let registered = registrations[activity]?[token]
                switch payload(for: push) {
                case .success(let payload):
                    sendBudget.started()
                    actions.append(.send(Send(
                        activityID: activity, token: token, environment: registered?.environment ?? configuration.defaultEnvironment,
                        app: registered?.app, push: push, payload: payload)))
                case .failure(let error):
                    // A start made for a token that missed its start carries
                    // the attributes and can outgrow the limit its update met.
                    let refused = deliveries[activity]?.fanOut.completed(
                        token: token, version: push.version, outcome: .permanent(reason: error.description), now: now, jitter: 0) ?? []
                    pending.append(contentsOf: refused)
                }
            case .wake(let at):
                wakes.schedule(.retry(activity), at: at)
            case .removeToken(DeviceToken.broadcastChannel, let reason):
                actions += channelRefused(activity, reason: reason, now: now)
            case .removeToken(let token, let reason):
                actions.append(.observe(.tokenRemoved(activity, token, reason: reason)))
                registrations[activity]?.remove(token)
                if registrations[activity]?.isEmpty == true { registrations.removeValue(forKey: activity) }
                let key = TokenRegistration.storeKey(activity, token)
                deliveries[activity]?.pendingAcks += 1
                actions.append(.produce(Produce(topic: .tokenStore, key: key, value: nil, partition: partition, ticket: issueTicket(.deadLetterForActivity(activity)))))
            case .deadLetter(let token, let push, let reason, let detail, let attempts):
                var details: [String: JSONValue] = [
                    "apns.reason": .string(detail), "attempts": .integer(Int64(attempts)), "version": .integer(Int64(push.version)),
                    "priority": .integer(Int64(push.priority.rawValue)),
                ]
                if let requested = push.downgradedFrom { details["priority_downgraded_from"] = .integer(Int64(requested.rawValue)) }
                if token == .broadcastChannel, let channel = channel(of: activity) { details["channel_id"] = .string(channel.id) }
                let letter = DeadLetter(
                    reason: reason, message: "push version \(push.version) of activity \(activity) to \(destinationName(token, of: activity)) failed: \(detail)",
                    activityID: activity, token: token == .broadcastChannel ? nil : token, details: details, deadLetteredAt: now)
                deliveries[activity]?.pendingAcks += 1
                actions.append(.produce(Produce(topic: .deadLetters, key: activity.rawValue, value: letter.serialized(), partition: nil, ticket: issueTicket(.deadLetterForActivity(activity)))))
                actions.append(.observe(.deadLettered(letter)))
                if var delivery = deliveries.removeValue(forKey: activity) {
                    let failed = TokenOutcome(result: .failed, reason: detail, version: push.version, event: push.event, at: now)
                    actions += record(failed, of: token, in: activity, delivery: &delivery)
                    deliveries[activity] = delivery
                }
            case .completed:
                break  // read from the fan-out in finishCompletion
            }
        }
        if deliveries[activity]?.pendingAcks == 0 { actions += finishCompletion(activity, now: now) }
        return actions
    }

    /// The encoded payload of `push`, built once per version and event and
    /// shared by every token's send.
    private mutating func payload(for push: LiveActivityPush) -> Result<[UInt8], PayloadTooLargeError> {
        let activity = push.activityID
        if let cached = deliveries[activity]?.payloads[push.event], cached.version == push.version { return .success(cached.bytes) }
        let encoded = Result { () throws(PayloadTooLargeError) in try APNsPayload.encode(push) }
        if case .success(let bytes) = encoded { deliveries[activity]?.payloads[push.event] = (push.version, bytes) }
        return encoded
    }

    /// Writes the snapshot of the newest completed flush, with the activity's
    /// push history; its ack completes the offsets of every flush up to it.
    private mutating func finishCompletion(_ activity: ActivityID, now: UnixTime) -> [Action] {
        guard deliveries[activity]?.pendingAcks == 0, var delivery = deliveries.removeValue(forKey: activity) else { return [] }
        let through = delivery.fanOut.completedThrough
        var offsets: [Int64] = []
        var newest: Coalescer.Flush?
        while let first = delivery.flushes.first,
              first.push.version <= through || delivery.skipped.contains(first.push.version)
        {
            delivery.skipped.remove(first.push.version)
            delivery.flushes.removeFirst()
            offsets += first.offsets
            newest = first
        }
        guard let newest else {
            deliveries[activity] = delivery
            return []
        }
        var counts = PushSummary.Counts()
        for (version, tally) in delivery.counts where version <= newest.push.version {
            counts.add(tally)
            delivery.counts.removeValue(forKey: version)
        }
        deliveries[activity] = delivery
        let summary = PushSummary(
            version: newest.push.version, event: newest.push.event, completedAt: now, commands: offsets.count,
            delivered: counts.delivered, failed: counts.failed)
        let history = Array(((pushHistory[activity] ?? []) + [summary]).suffix(PushSummary.historyLimit))
        pushHistory[activity] = history
        let ticket = issueTicket(.snapshot(activity, offsets: offsets))
        let snapshot = PushSummary.serializedSnapshot(newest.snapshot, history: history, channel: channel(of: activity)?.json)
        return [
            .produce(Produce(
                topic: .state, key: activity.rawValue, value: snapshot,
                partition: partition, ticket: ticket)),
            .observe(.pushCompleted(
                newest.snapshot, commands: offsets.count, tokens: delivery.deviceTokenCount,
                sample: registrations[activity].map { Array($0.tokens.prefix(4)).sorted() } ?? [])),
        ]
    }
}
