import APNs
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The dispatcher stage: the worker group assigns it partitions of
/// `commands`; for each one it follows the same partition of `tokens` and
/// `starts` (co-partitioned: an activity's commands, tokens and starts meet
/// in one place), restores its `state` and `token-store` changelogs, then
/// runs a ``PartitionDispatcher`` over its records through a
/// ``PartitionRunner``, sending pushes through the APNs pools and writing
/// snapshots, token changes and dead letters.
///
/// The group rebalances cooperatively: a scale event revokes only the
/// partitions that move, and the others keep pushing through it. The
/// co-partitions are read by a second consumer that joins no group and
/// assigns them itself; its offsets are committed under
/// `<group_id>.copartitions`, where the next owner finds them.
/// ``PartitionOwnership`` decides each partition's moves. A partition a
/// rebalance revokes lingers: this worker reads its commands on the second
/// consumer and pushes on until its next owner claims it, through the
/// partition's ``HandOverMark`` (kept under the same group); a new owner
/// waits for that mark to say released before it restores. A partition
/// revoked as this worker leaves is released (sends and writes under way
/// awaited, offsets committed) before the revocation returns. Either way
/// two workers never push one partition at once.
///
/// Each partition has its own lock and its own timer; the only state shared
/// across partitions is the table of runners (looked up per record) and the
/// back-pressure gate (a counter and a small lock, never held during a
/// partition's work).
public final class Dispatcher: Service, Sendable {
    public typealias Observer = @Sendable (PartitionDispatcher.Observation) -> Void

    /// Where the stage stands, for `/readyz` and `/status`.
    public enum Phase: String, Sendable, Hashable {
        /// Not part of both groups yet (no assignment of `<group_id>` since the
        /// last revocation, as in a rebalance, or none yet of `<group_id>.router`).
        case joining
        /// Some owned partitions are still reading their changelogs.
        case restoring
        /// Every owned partition is restored and dispatching.
        case ready
        /// Joined, owns no partition (more workers than partitions): ready to take over.
        case standby
        /// Shutting down.
        case draining
    }

    struct Table: Sendable {
        var runners: [Int32: PartitionRunner] = [:]
        var joined = false
        /// The router stage received an assignment of `<group_id>.router` (possibly empty).
        var routerJoined = false
        var draining = false
    }

    let configuration: WorkerConfiguration
    /// The group member: `commands`.
    let consumer: KafkaConsumer
    /// The co-partitions (`tokens`, `starts`) of the partitions the group
    /// assigned, the `commands` of those lingering, and the marks.
    let follower: KafkaConsumer
    let producer: KafkaProducer
    /// For the admin client that counts `commands` partitions at shutdown.
    let client: KafkaClientConfiguration
    let reader: KafkaPartitionReader
    let sender: PushSender
    /// Creates and deletes broadcast activities' channels; nil refuses them.
    let channels: BroadcastChannels?
    let logger: Logger
    let metrics: WorkerMetrics
    let observer: Observer?
    /// Spans of pushes and APNs requests; nil when tracing is off.
    let tracing: WorkerTracing?
    let clock: @Sendable () -> UnixTime
    let table = Mutex(Table())
    let ownership: Mutex<PartitionOwnership>
    /// The partition numbers whose co-partitions the follower reads; taken
    /// while assigning or unassigning them, so a release and a late
    /// assignment of the same partition never interleave.
    let followed = Mutex<Set<Int32>>([])
    /// The lingering partitions, whose commands the follower reads: their
    /// commands' offsets are not committed (the group no longer assigns
    /// them to this worker; the next owner reads the repeats as repeats).
    let lingering = Mutex<Set<Int32>>([])
    /// Hand-over decisions whose I/O is still under way.
    let handOversUnderWay = Atomic<Int>(0)
    /// Signalled when a hand-over decision was carried out and when a
    /// revoked partition settles (and, while draining, when a partition is
    /// idle): what the revocation handler, the hand-over watch and the
    /// shutdown wait for.
    let changes: ChangeSignal
    /// Draining: the runners report when they are idle.
    let reportsIdle = Atomic<Bool>(false)
    let gate: Mutex<BackpressureGate>
    private let outstandingTotal = Atomic<Int>(0)
    private let backlogNow = Atomic<Int>(0)
    /// Per `commands` partition, the offset after the last command this
    /// worker's router wrote there.
    private let writtenEnds = Mutex<[Int32: Int64]>([:])
    let eventLoops: any EventLoopGroup
    let stage: ConsumerStage
    /// Where outcomes go: the `outcomes` topic, and the webhook.
    private let outcomes: OutcomePublisher
    /// Where the activity types commands are checked against come from:
    /// the rules in force, followed as they are reloaded.
    private let types: RuleSetStore?

    /// - Parameter clock: the wall clock the machines are given (Unix time).
    public init(
        configuration: WorkerConfiguration, client: KafkaClientConfiguration, producer: KafkaProducer,
        sender: PushSender, channels: BroadcastChannels? = nil, logger: Logger, metrics: WorkerMetrics, observer: Observer? = nil,
        tracing: WorkerTracing? = nil, types: RuleSetStore? = nil,
        publishesOutcomes: Bool = true, webhook: (@Sendable (_ id: String, _ body: [UInt8]) -> Void)? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: @escaping @Sendable () -> UnixTime = { UnixTime(seconds: Date().timeIntervalSince1970) }
    ) throws(KafkaError) {
        self.configuration = configuration
        self.types = types
        self.outcomes = OutcomePublisher(
            producer: producer, topic: publishesOutcomes ? configuration.topic(.outcomes) : nil, metrics: metrics, webhook: webhook)
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.groupID)
        consumerConfiguration.assignmentStrategy = .cooperativeSticky
        consumerConfiguration.autoCommitInterval = .seconds(1)
        consumerConfiguration.offsetReset = .earliest
        consumerConfiguration.client.properties = WorkerConfiguration.lowLatencyConsumerProperties.merging(client.properties) { _, given in given }
        var followerConfiguration = consumerConfiguration
        followerConfiguration.groupID = Self.followerGroup(configuration.kafka.groupID)
        consumerConfiguration.groupInstanceID = configuration.kafka.instanceID.isEmpty ? nil : configuration.kafka.instanceID
        let revocations = RevocationRelay()
        self.consumer = try KafkaConsumer(
            configuration: consumerConfiguration, topics: [configuration.topic(.commands)], logger: logger,
            onRevocation: { partitions, lost in revocations.handler.withLock { $0 }?(partitions, lost) })
        self.follower = try KafkaConsumer(assigningManually: followerConfiguration, logger: logger)
        self.ownership = Mutex(PartitionOwnership(configuration: .init(
            releaseTimeout: configuration.shutdown.releaseTimeout, lingerTimeout: configuration.shutdown.lingerTimeout)))
        self.producer = producer
        self.client = client
        self.reader = KafkaPartitionReader(configuration: client, logger: logger)
        self.sender = sender
        self.channels = channels
        self.logger = logger
        self.metrics = metrics
        self.observer = observer
        self.tracing = tracing
        self.clock = clock
        self.gate = Mutex(configuration.backpressureGate)
        self.eventLoops = eventLoopGroup
        self.changes = ChangeSignal(eventLoop: eventLoopGroup.next())
        self.stage = ConsumerStage(consumer: consumer)
        revocations.handler.withLock { $0 = { [weak self] partitions, lost in self?.revoking(partitions, lost: lost) } }
    }

    /// Where the follower's offsets are committed: a group no member joins.
    static func followerGroup(_ groupID: String) -> String { groupID + ".copartitions" }

    /// Where the stage stands.
    public var phase: Phase {
        let (joined, draining, runners) = table.withLock { ($0.joined && $0.routerJoined, $0.draining, Array($0.runners.values)) }
        if draining { return .draining }
        if !joined { return .joining }
        if runners.isEmpty { return .standby }
        return runners.contains(where: \.isRestoring) ? .restoring : .ready
    }

    /// Called by the router stage on each assignment of its group: the worker
    /// is not ready before it has joined both groups.
    public func routerAssigned() {
        table.withLock { $0.routerJoined = true }
    }

    /// Whether the worker can take its share: joined both groups and every
    /// owned partition restored (a member that owns nothing is a ready standby).
    public var isReady: Bool {
        switch phase {
        case .ready, .standby: true
        case .joining, .restoring, .draining: false
        }
    }

    /// Whether nothing is in progress in any owned partition.
    public var isIdle: Bool {
        table.withLock { Array($0.runners.values) }.allSatisfy(\.isIdle)
    }

    /// Where the partitions of this worker stand, the records in progress
    /// and whether back-pressure holds them, for the admin endpoint.
    public struct Status: Sendable {
        /// Every partition this worker holds, in any phase.
        public var partitions: [Int32]
        public var restoring: [Int32]
        public var owned: [Int32]
        /// Revoked, and still pushed until the next owner claims them.
        public var lingering: [Int32]
        public var releasing: [Int32]
        public var outstanding: Int
        public var paused: Bool
    }

    public var status: Status {
        let ownership = ownership.withLock { $0 }
        return Status(
            partitions: ownership.held, restoring: ownership.partitions(in: .restoring), owned: ownership.partitions(in: .owned),
            lingering: ownership.partitions(in: .lingering), releasing: ownership.partitions(in: .releasing), outstanding: outstandingTotal.load(ordering: .relaxed),
            paused: gate.withLock { $0.isPaused })
    }

    /// The state of `activity` held by this worker's partition that owns
    /// it, or nil when no restored partition of this worker holds it.
    public func activityState(_ activity: ActivityID) -> ActivityState? {
        for runner in table.withLock({ Array($0.runners.values) }) {
            if let state = runner.state(of: activity) { return state }
        }
        return nil
    }

    /// Whether this worker can tell that `activity` has no state: its
    /// `commands` partition (`partition`) is owned here and restored, every
    /// command Kafka has told of (and every one this worker's router wrote)
    /// has been read, and the partition holds nothing of the activity.
    /// False whenever any of that is not known.
    public func holdsNoState(of activity: ActivityID, partition: Int32) -> Bool {
        guard ownership.withLock({ $0.partitions(in: .owned) }).contains(partition), let runner = runner(partition), !runner.isRestoring else {
            return false
        }
        let next = runner.nextCommandOffset.load(ordering: .relaxed)
        guard let fetched = consumer.cachedEndOffset(TopicPartition(topic: configuration.topic(.commands), partition: partition)) else { return false }
        let end = max(fetched, writtenEnds.withLock { $0[partition] ?? 0 })
        guard next >= end || (next < 0 && end == 0) else { return false }
        return runner.state(of: activity) == nil && !runner.isClosed
    }

    /// Sets `livedispatch_records_in_progress` to the records in progress
    /// now, `livedispatch_sends_in_flight` to the sends in flight, the
    /// APNs pools' gauges and the `process_*` series (CPU, memory,
    /// descriptors); called when metrics are scraped, so neither the hot
    /// path nor a timer updates them.
    public func recordBacklog() {
        sender.recordGauges()
        if let statistics = ProcessStatistics.current() { metrics.process(statistics) }
        metrics.backlog(outstandingTotal.load(ordering: .relaxed))
        let runners = table.withLock { Array($0.runners.values) }
        metrics.sendsInFlight(runners.reduce(0) { $0 + $1.sendsInFlight }, limit: configuration.limits.maxInFlightPerWorker)
    }

    public func run() async throws {
        let sharing = eventLoops.next().scheduleRepeatedTask(
            initialDelay: Self.sendLimitSharingInterval, delay: Self.sendLimitSharingInterval
        ) { [self] _ in
            shareSendLimit()
            holdPausable()
            measureBacklog()
        }
        defer { sharing.cancel() }
        let follower = self.follower
        try await stage.run(
            handle: { self.handle($0) },
            sideTasks: [{ await self.watchHandOvers() }, {
                await withDiscardingTaskGroup { group in
                    group.addTask {
                        await withTaskCancellationHandler {
                            do { try await follower.runUntilClosed() } catch { self.logger.error("The co-partition consumer stopped", metadata: ["kafka.error": "\(error)"]) }
                        } onCancel: {
                            follower.close()
                        }
                    }
                    for await event in follower.events { self.handle(event) }
                }
            }],
            drain: { await self.drain() }, afterClose: { await self.awaitHandOvers() })
    }

    func runner(_ number: Int32) -> PartitionRunner? {
        table.withLock { $0.runners[number] }
    }

    // MARK: Consumer events

    func handle(_ event: KafkaConsumerEvent) {
        switch event {
        case .assigned(let partitions):
            table.withLock { $0.joined = true }
            let numbers = partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition)
            perform(ownership.withLock { $0.assigned(numbers, now: clock()) })
            shareSendLimit()
        case .revoked(let partitions, let lost):
            // Released already, by the revocation handler.
            if lost { table.withLock { $0.joined = false } }
            logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(partitions.map(\.partition).sorted())", "kafka.lost": "\(lost)"])
            reportPartitions()
        case .record(let record):
            let topic: InternalTopic = switch record.topic {
            case configuration.topic(.commands): .commands
            case configuration.topic(.starts): .starts
            default: .tokens
            }
            metrics.recordConsumed(topic.rawValue)
            guard let runner = runner(record.partition) else { return }
            var newTypes: ActivityTypes?
            if topic == .commands {
                runner.nextCommandOffset.store(record.offset + 1, ordering: .relaxed)
                if let types { newTypes = runner.typesToFollow(types) }
            }
            // Only a sampled trace goes into the machine: nothing of another would be recorded.
            let trace = tracing != nil && topic == .commands ? WorkerTracing.context(of: record.headers).flatMap { $0.isSampled ? $0 : nil } : nil
            runner.apply { machine, now in
                if let newTypes { machine.useTypes(newTypes) }
                let input = PartitionDispatcher.Record(
                    offset: record.offset, key: record.key, value: record.value,
                    timestamp: record.timestampMilliseconds.map { UnixTime(seconds: Double($0) / 1000) } ?? now, trace: trace)
                return switch topic {
                case .commands: machine.command(input, now: now)
                case .starts: machine.audienceStartRecord(input, now: now)
                case .tokens, .state, .tokenStore, .deadLetters, .channels, .outcomes: machine.tokenRecord(input, now: now)
                }
            }
        }
    }

    /// Shares the worker's limit on sends in flight
    /// (`limits.max_in_flight_per_worker`) among the partitions it owns, by
    /// their demand (``SendLimitShares``); a partition whose share is
    /// unchanged is not touched.
    private func shareSendLimit() {
        let runners = table.withLock { Array($0.runners.values) }
        guard !runners.isEmpty else { return }
        let demands = runners.map(\.sendDemand)
        let shares = SendLimitShares.shares(of: configuration.limits.maxInFlightPerWorker, among: demands)
        for (runner, share) in zip(runners, shares) where runner.sendLimit != share {
            runner.apply { machine, now in machine.setSendLimit(share, now: now) }
        }
    }

    /// How often the shares of the send limit follow the partitions' demand.
    static let sendLimitSharingInterval = TimeAmount.milliseconds(50)

    /// Publishes how many partitions this worker owns and how many of them
    /// are still restoring; returns the latter.
    @discardableResult
    func reportPartitions() -> Int {
        let status = status
        metrics.partitions(
            owned: status.partitions.count, restoring: status.restoring.count, lingering: status.lingering.count, releasing: status.releasing.count)
        return status.restoring.count
    }

    var services: DispatchServices {
        DispatchServices(
            clock: clock, jitter: { Double.random(in: 0..<1) }, sender: sender,
            channels: { [channels] request, done in
                guard let channels else {
                    if case .create(let activity, _, _, _) = request {
                        done(.createFailed(activity, reason: "this worker manages no broadcast channels", retryable: false))
                    }
                    return
                }
                channels.perform(request, done: done)
            },
            enqueue: { [self] produce, number in enqueue(produce, partition: number) },
            commit: { [self] topic, number, offset in commit(topic, number, offset) },
            observe: { [self] observation in observe(observation) },
            pushSent: { [self] send, result, seconds in pushSent(send, result, seconds: seconds) },
            writeFailed: { [self] produce, error, attempt in
                let topic = configuration.topic(produce.topic)
                guard error.isPermanent else {
                    logger.error("Writing to Kafka failed; retrying", metadata: [
                        "kafka.topic": "\(topic)", "kafka.error": "\(error)", "kafka.attempt": "\(attempt)",
                    ])
                    return
                }
                metrics.writeDropped(topic: topic)
                logger.error("Kafka refused a record for good; not retrying", metadata: [
                    "kafka.topic": "\(topic)", "kafka.error": "\(error)", "kafka.bytes": "\(produce.value?.count ?? 0)",
                ])
            },
            countOutstanding: { [self] delta in outstandingTotal.add(delta, ordering: .relaxed).newValue },
            outstandingMoved: { [self] total in outstandingMoved(to: total) },
            writeTraced: { [tracing] produce, report, started, ended in tracing?.recordWrite(produce, report, started: started, ended: ended) },
            changed: { [changes] in changes.signal() },
            reportsIdle: { [self] in reportsIdle.load(ordering: .relaxed) })
    }

    // MARK: I/O for the runners

    private func enqueue(_ produce: PartitionDispatcher.Produce, partition number: Int32) -> Result<KafkaPendingDelivery, KafkaError> {
        Result { () throws(KafkaError) in
            try producer.enqueue(
                topic: configuration.topic(produce.topic), key: Array(produce.key.utf8), value: produce.value,
                partition: produce.partition)
        }
    }

    private func commit(_ topic: InternalTopic, _ number: Int32, _ offset: Int64) {
        if topic == .commands, lingering.withLock({ $0.contains(number) }) { return }
        let partition = TopicPartition(topic: configuration.topic(topic), partition: number)
        do {
            try (topic == .commands ? consumer : follower).storeOffsets([KafkaCommitOffset(topicPartition: partition, offset: offset)])
        } catch {
            logger.warning("Storing an offset failed; it is committed with a later one", metadata: ["kafka.partition": "\(partition)", "kafka.error": "\(error)"])
        }
    }

    private func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double) {
        if let tracing {
            let ended = clock()
            tracing.recordRequest(send, result, started: ended + -seconds, ended: ended)
        }
        // A send no APNs pool took is not a push APNs answered.
        guard let label = result.label else { return }
        metrics.pushSent(label, seconds: seconds)
        logger.trace("APNs answered a push", metadata: Logger.Metadata.trace(send.push.traceContext).merging([
            "apns.outcome": "\(label)", "apns.seconds": "\(seconds)",
        ]) { own, _ in own })
        if let error = result.misconfiguration {
            logger.error("APNs refuses every push: fix the configuration", metadata: ["apns.error": "\(error)"])
        }
    }

    private func observe(_ observation: PartitionDispatcher.Observation) {
        metrics.observe(observation)
        observer?(observation)
        outcomes.publish(observation, now: clock())
        switch observation {
        case .tokenRemoved(let activity, let token, let reason):
            logger.info("Token removed", metadata: ["activity.id": "\(activity)", "apns.token": "\(token.hex)", "apns.reason": "\(reason)"])
        case .deadLettered(let letter):
            logger.info("Dead-lettered", metadata: ["dead_letter.reason": "\(letter.reason)", "activity.id": "\(letter.activityID?.rawValue ?? "")"])
        case .pushCompleted(let activity, let commands, _, _, _):
            logger.trace("Activity push completed", metadata: ["activity.id": "\(activity.activityID)", "activity.version": "\(activity.version)", "activity.commands": "\(commands)"])
        case .duplicateCommand(let activity, let commandID):
            logger.debug("Duplicate command acknowledged", metadata: ["activity.id": "\(activity)", "command.id": "\(commandID)"])
        case .uncheckedCommand(let activity, let checking):
            logger.debug("Command applied without a type check", metadata: ["activity.id": "\(activity)", "activity.type_check": "\(checking)"])
        case .priorityDowngraded(let activity, let version, let from, let to):
            logger.info("Priority budget spent: push sent at a lower priority", metadata: [
                "activity.id": "\(activity)", "activity.version": "\(version)", "apns.priority.requested": "\(from)", "apns.priority": "\(to)",
            ])
        case .audienceStarted(let activity, let audience, let delivered, let alreadyStarted):
            logger.debug("Audience start sent", metadata: [
                "activity.id": "\(activity)", "audience": "\(audience)", "start.delivered": "\(delivered.count)", "start.already_started": "\(alreadyStarted)",
            ])
        case .channelCreated(let activity, let channel):
            logger.info("Broadcast channel published", metadata: ["activity.id": "\(activity)", "apns.channel_id": "\(channel.id)"])
        case .channelDeleted(let activity, let channelID):
            logger.debug("Broadcast channel of an expired activity deleted", metadata: ["activity.id": "\(activity)", "apns.channel_id": "\(channelID)"])
        case .pushTraced(let trace):
            tracing?.recordPush(trace, completedAt: clock())
        case .activityExpired:
            break
        }
    }

    // MARK: Back-pressure

    /// The records in progress over all partitions moved to `total`: pause
    /// every restored partition above the high watermark, resume below the
    /// low. Decided and done under the gate's lock, so a pause and a resume
    /// never interleave (lock order: gate, then the partition table; a
    /// partition's flags are read without its lock, so the gate never waits
    /// for one partition's work while others wait for the gate).
    private func outstandingMoved(to total: Int) {
        let action = gate.withLock { gate in
            let action = gate.update(outstanding: total)
            switch action {
            case .none: break
            case .pause: pauseNewlyHeld(&gate)
            case .resume: try? resume(readyPartitions())
            }
            return action
        }
        switch action {
        case .none:
            return
        case .pause:
            logger.notice("Backlog above the high watermark; pausing partitions", metadata: ["backpressure.high": "\(configuration.backpressure.highWatermark)"])
            metrics.paused(true)
        case .resume:
            logger.notice("Backlog below the low watermark; resuming partitions", metadata: ["backpressure.low": "\(configuration.backpressure.lowWatermark)"])
            metrics.paused(false)
        }
    }

    private func readyPartitions() -> [Int32] {
        table.withLock { Array($0.runners.values) }.filter { !$0.isRestoring }.map(\.number).sorted()
    }

    /// The commands of this worker's partitions it has not read yet,
    /// measured every 50 ms: the end of each partition as of its last fetch,
    /// or as far as this worker's router wrote it when that is further (a
    /// paused partition fetches nothing). The router counts them in its
    /// back-pressure: a worker behind on dispatching stops routing, so its
    /// CPU goes to dispatching what is waiting instead of turning more
    /// events into commands it cannot send yet. Records taken in and not
    /// finished do not count: they wait for their windows and their pushes,
    /// not for CPU, and routing on meanwhile keeps the cores busy (when
    /// they counted, both stages paused together and the worker sat idle
    /// until the held windows closed).
    public var backlog: Int { backlogNow.load(ordering: .relaxed) }

    /// Where a command this worker's router wrote landed.
    public func commandWritten(_ report: KafkaDeliveryReport) {
        writtenEnds.withLock { ends in
            if report.offset >= ends[report.partition, default: 0] { ends[report.partition] = report.offset + 1 }
        }
    }

    private func measureBacklog() {
        let runners = table.withLock { Array($0.runners.values) }
        let written = writtenEnds.withLock { $0 }
        var unread = 0
        for runner in runners {
            let next = runner.nextCommandOffset.load(ordering: .relaxed)
            let fetched = consumer.cachedEndOffset(TopicPartition(topic: configuration.topic(.commands), partition: runner.number)) ?? 0
            let end = max(fetched, written[runner.number] ?? 0)
            guard next >= 0, end > next else { continue }
            unread += Int(clamping: end - next)
        }
        backlogNow.store(unread, ordering: .relaxed)
    }

    /// While the gate is closed, pauses the restored partitions it does not
    /// hold yet: one that was still reading its previous owner's commands at
    /// the pause (its held pushes wait for that read) once it has caught up.
    private func holdPausable() {
        let newly = gate.withLock { gate in gate.isPaused ? pauseNewlyHeld(&gate) : [] }
        guard !newly.isEmpty else { return }
        logger.info("Partitions caught up while the backlog is above the high watermark; pausing them", metadata: ["kafka.partitions": "\(newly)"])
    }

    /// Pauses the restored partitions not catching up that `gate` does not
    /// hold yet; returns them.
    @discardableResult
    private func pauseNewlyHeld(_ gate: inout BackpressureGate) -> [Int32] {
        let pausable = Set(table.withLock { Array($0.runners.values) }.filter { !$0.isRestoring && !$0.isCatchingUp }.map(\.number))
        let newly = gate.hold(pausable).sorted()
        guard !newly.isEmpty else { return [] }
        try? pause(newly)
        return newly
    }

    // MARK: Shutdown

    /// On shutdown, when other workers will take the partitions over (and
    /// partitions linger at all, `shutdown.linger_timeout` above 0): nothing
    /// to do before the consumer closes, which revokes each partition; each
    /// lingers, as in a scale event, pushing on until the worker that takes
    /// it over claims it, and is released then (``awaitHandOvers()``).
    /// When this worker holds every `commands` partition (the group's only
    /// member), nobody would claim them: it pushes what is held at once and
    /// waits, within `shutdown.timeout`, for every partition to be idle;
    /// then the consumer closes, which revokes and releases each partition
    /// at once (what it finished committed, the next start taking over the
    /// rest).
    private func drain() async {
        let runners = table.withLock { table in
            table.draining = true
            return Array(table.runners.values)
        }
        let held = ownership.withLock(\.held).count
        if configuration.shutdown.lingerTimeout > 0,
            await KafkaAdmin.othersMayTakeOver([configuration.topic(.commands)], held: held, configuration: client, logger: logger)
        {
            logger.info("Stopping; each partition is pushed until the worker taking it over claims it")
            return
        }
        perform(ownership.withLock { $0.leave(now: clock()) })
        try? pause(runners.map(\.number).sorted())
        // From here each runner signals ``changes`` when an input leaves it idle.
        reportsIdle.store(true, ordering: .relaxed)
        for runner in runners { runner.apply { machine, now in machine.drain(now: now) } }
        let deadline = ContinuousClock.now + .seconds(configuration.shutdown.timeout)
        while !Task.isCancelled {
            let seen = changes.generation
            let held = table.withLock { Array($0.runners.values) }
            if held.allSatisfy(\.isIdle), ownership.withLock({ $0.partitions(in: .releasing).isEmpty }) {
                logger.info("Dispatcher drained")
                return
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            await changes.wait(after: seen, timeout: left)
        }
        logger.warning("Shutdown timeout reached with work in flight; it is re-delivered to the next owner", metadata: ["shutdown.timeout": "\(configuration.shutdown.timeout)"])
    }

    /// After the consumer closed on shutdown: the partitions it let linger
    /// are pushed on until their new owners claim them, then released; this
    /// waits for that, at most until their linger deadline and release
    /// timeout have passed.
    private func awaitHandOvers() async {
        let linger = min(max(0, configuration.shutdown.lingerTimeout), PartitionOwnership.longestLinger)
        let bound = linger + max(0, configuration.shutdown.releaseTimeout) + 1
        let deadline = ContinuousClock.now + .seconds(bound)
        while !Task.isCancelled {
            let seen = changes.generation
            if ownership.withLock(\.held).isEmpty, handOversUnderWay.load(ordering: .sequentiallyConsistent) == 0 { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            await changes.wait(after: seen, timeout: left)
        }
        logger.warning("Partitions still held at the end of the shutdown; their next owners redo what they had not finished", metadata: [
            "kafka.partitions": "\(ownership.withLock(\.held))",
        ])
    }
}

/// Carries the group consumer's revocation handler to the dispatcher, which
/// exists only after the consumer it hands the handler to.
private final class RevocationRelay: Sendable {
    let handler = Mutex<KafkaConsumer.RevocationHandler?>(nil)
}
