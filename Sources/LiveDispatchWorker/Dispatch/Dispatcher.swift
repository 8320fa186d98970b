import APNs
import Foundation
import Kafka
import LiveDispatchCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The dispatcher stage: consumes the co-partitioned `commands`, `tokens`
/// and `starts` topics in the worker group and, for each assigned partition number,
/// restores its `state` and `token-store` changelogs, then runs a
/// ``PartitionDispatcher`` over its records through a ``PartitionRunner``,
/// sending pushes through the APNs pools and writing snapshots, token
/// changes and dead letters.
///
/// The `range` assignor keeps partition N of `commands` and of `tokens` with
/// the same member, which is what makes an activity's tokens and commands
/// meet in one place.
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

    private struct Table: Sendable {
        var runners: [Int32: PartitionRunner] = [:]
        var joined = false
        /// The router stage received an assignment of `<group_id>.router` (possibly empty).
        var routerJoined = false
        var draining = false
    }

    let configuration: WorkerConfiguration
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let reader: KafkaPartitionReader
    let sender: PushSender
    /// Creates and deletes broadcast activities' channels; nil refuses them.
    let channels: BroadcastChannels?
    let logger: Logger
    let metrics: WorkerMetrics
    let observer: Observer?
    private let clock: @Sendable () -> UnixTime
    private let table = Mutex(Table())
    private let gate: Mutex<BackpressureGate>
    private let outstandingTotal = Atomic<Int>(0)
    private let backlogNow = Atomic<Int>(0)
    /// Per `commands` partition, the offset after the last command this
    /// worker's router wrote there.
    private let writtenEnds = Mutex<[Int32: Int64]>([:])
    private let eventLoops: any EventLoopGroup
    private let stage: ConsumerStage

    /// - Parameter clock: the wall clock the machines are given (Unix time).
    public init(
        configuration: WorkerConfiguration, client: KafkaClientConfiguration, producer: KafkaProducer,
        sender: PushSender, channels: BroadcastChannels? = nil, logger: Logger, metrics: WorkerMetrics, observer: Observer? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: @escaping @Sendable () -> UnixTime = { UnixTime(seconds: Date().timeIntervalSince1970) }
    ) throws(KafkaError) {
        self.configuration = configuration
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.groupID)
        consumerConfiguration.assignmentStrategy = .range
        consumerConfiguration.autoCommitInterval = .seconds(1)
        consumerConfiguration.groupInstanceID = configuration.kafka.instanceID.isEmpty ? nil : configuration.kafka.instanceID
        consumerConfiguration.offsetReset = .earliest
        consumerConfiguration.client.properties = WorkerConfiguration.lowLatencyConsumerProperties.merging(client.properties) { _, given in given }
        self.consumer = try KafkaConsumer(
            configuration: consumerConfiguration,
            topics: [configuration.topic(.commands), configuration.topic(.tokens), configuration.topic(.starts)], logger: logger)
        self.producer = producer
        self.reader = KafkaPartitionReader(configuration: client, logger: logger)
        self.sender = sender
        self.channels = channels
        self.logger = logger
        self.metrics = metrics
        self.observer = observer
        self.clock = clock
        self.gate = Mutex(configuration.backpressureGate)
        self.eventLoops = eventLoopGroup
        self.stage = ConsumerStage(consumer: consumer)
    }

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

    /// Partitions owned and the records in progress, for the admin endpoint.
    public var status: (partitions: [Int32], outstanding: Int, paused: Bool) {
        let partitions = table.withLock { $0.runners.keys.sorted() }
        return (partitions, outstandingTotal.load(ordering: .relaxed), gate.withLock { $0.isPaused })
    }

    /// Sets `livedispatch_records_in_progress` to the records in progress
    /// now, `livedispatch_sends_in_flight` to the sends in flight, and the
    /// `process_*` series (CPU, memory, descriptors); called when metrics
    /// are scraped, so the hot path never updates them.
    /// The state of `activity` held by this worker's partition that owns
    /// it, or nil when no restored partition of this worker holds it.
    public func activityState(_ activity: ActivityID) -> ActivityState? {
        for runner in table.withLock({ Array($0.runners.values) }) {
            if let state = runner.state(of: activity) { return state }
        }
        return nil
    }

    public func recordBacklog() {
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
        try await stage.run(handle: { self.handle($0) }, drain: { await self.drain() })
    }

    private func runner(_ number: Int32) -> PartitionRunner? {
        table.withLock { $0.runners[number] }
    }

    // MARK: Consumer events

    func handle(_ event: KafkaConsumerEvent) {
        switch event {
        case .assigned(let partitions):
            table.withLock { $0.joined = true }
            let numbers = Set(partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition))
            for number in numbers.sorted() { assign(number) }
            shareSendLimit()
        case .revoked(let partitions, let lost):
            let numbers = Set(partitions.map(\.partition))
            // The range assignor revokes everything when a rebalance starts: until
            // the next assignment the worker does not know its share (joining).
            let removed = table.withLock { table in
                table.joined = false
                return numbers.compactMap { table.runners.removeValue(forKey: $0) }
            }
            // Each takes its records in progress out of the count.
            for runner in removed { runner.close() }
            logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(numbers.sorted())", "kafka.lost": "\(lost)"])
            reportPartitions()
        case .record(let record):
            let topic: InternalTopic = switch record.topic {
            case configuration.topic(.commands): .commands
            case configuration.topic(.starts): .starts
            default: .tokens
            }
            metrics.recordConsumed(topic.rawValue)
            guard let runner = runner(record.partition) else { return }
            if topic == .commands { runner.nextCommandOffset.store(record.offset + 1, ordering: .relaxed) }
            runner.apply { machine, now in
                let input = PartitionDispatcher.Record(
                    offset: record.offset, key: record.key, value: record.value,
                    timestamp: record.timestampMilliseconds.map { UnixTime(seconds: Double($0) / 1000) } ?? now)
                return switch topic {
                case .commands: machine.command(input, now: now)
                case .starts: machine.audienceStartRecord(input, now: now)
                case .tokens, .state, .tokenStore, .deadLetters, .channels: machine.tokenRecord(input, now: now)
                }
            }
        }
    }

    private func assign(_ number: Int32) {
        let runner = PartitionRunner(
            number: number, configuration: configuration.partitionDispatcher, eventLoop: eventLoops.next(),
            services: services)
        let previous = table.withLock { table in
            defer { table.runners[number] = runner }
            return table.runners[number]
        }
        previous?.close()
        do { try consumer.pause(coPartitions(number)) } catch { logger.warning("Pausing a partition for its restore failed", metadata: ["kafka.error": "\(error)"]) }
        logger.info("Partition assigned; restoring its state and tokens", metadata: ["kafka.partition": "\(number)"])
        reportPartitions()
        stage.schedule { [self] in await restore(runner) }
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
    private func reportPartitions() -> Int {
        let runners = table.withLock { Array($0.runners.values) }
        let restoring = runners.filter(\.isRestoring).count
        metrics.partitions(owned: runners.count, restoring: restoring)
        return restoring
    }

    private var services: DispatchServices {
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
            pushSent: { [self] outcome, seconds in pushSent(outcome, seconds: seconds) },
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
            outstandingMoved: { [self] total in outstandingMoved(to: total) })
    }

    private func coPartitions(_ number: Int32) -> [TopicPartition] {
        [.commands, .tokens, .starts].map { TopicPartition(topic: configuration.topic($0), partition: number) }
    }

    /// Reads the partition's `state` and `token-store` changelogs to their end, then lets its records flow.
    private func restore(_ runner: PartitionRunner) async {
        let number = runner.number
        let started = ContinuousClock.now
        var attempt = 0
        while !runner.isClosed {
            do {
                var states = 0
                var tokens = 0
                // The previous owner may have pushed any state of the commands
                // up to the partition's end now: hold pushes until they are read.
                let commandsEnd = try await reader.endOffset(topic: configuration.topic(.commands), partition: number)
                runner.restoring { $0.holdPushes(untilCommandOffset: commandsEnd) }
                // A batch of the reader's under one lock take.
                try await reader.readBatchesToEnd(topic: configuration.topic(.state), partition: number) { records in
                    runner.restoring { machine in
                        for record in records { machine.restoreState(key: String(decoding: record.key ?? [], as: UTF8.self), value: record.value) }
                    }
                    states += records.count
                }
                try await reader.readBatchesToEnd(topic: configuration.topic(.tokenStore), partition: number) { records in
                    runner.restoring { machine in
                        for record in records { machine.restoreToken(key: record.key ?? [], value: record.value) }
                    }
                    tokens += records.count
                }
                let read = ContinuousClock.now
                guard runner.finishRestore() else { return }
                // The last restore done: the records it fetched are free.
                if reportPartitions() == 0 { MallocTuning.releaseFreeMemory() }
                // A partition catching up reads on while others are paused:
                // its held pushes wait for the end of its replay.
                gate.withLock { gate in
                    guard !gate.isPaused || runner.isCatchingUp else { return }
                    gate.released(number)
                    try? consumer.resume(coPartitions(number))
                }
                logger.info("Partition restored", metadata: [
                    "kafka.partition": "\(number)", "restore.states": "\(states)", "restore.tokens": "\(tokens)",
                    "restore.seconds": "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                    "restore.install_seconds": "\(String(format: "%.3f", (ContinuousClock.now - read).seconds))",
                ])
                return
            } catch {
                attempt += 1
                logger.error("Restoring a partition failed; retrying", metadata: ["kafka.partition": "\(number)", "kafka.error": "\(error)", "restore.attempt": "\(attempt)"])
                try? await Task.sleep(for: .seconds(Backoff.partitionRestore.ceiling(attempt: attempt)))
            }
        }
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
        let partition = TopicPartition(topic: configuration.topic(topic), partition: number)
        do {
            try consumer.storeOffsets([KafkaCommitOffset(topicPartition: partition, offset: offset)])
        } catch {
            logger.warning("Storing an offset failed; it is committed with a later one", metadata: ["kafka.partition": "\(partition)", "kafka.error": "\(error)"])
        }
    }

    private func pushSent(_ outcome: APNsOutcome, seconds: Double) {
        metrics.pushSent(outcome, seconds: seconds)
        logger.trace("APNs answered a push", metadata: ["apns.outcome": "\(outcome.label)", "apns.seconds": "\(seconds)"])
        if case .misconfigured(let error) = outcome {
            logger.error("APNs refuses every push: fix the configuration", metadata: ["apns.error": "\(error)"])
        }
    }

    private func observe(_ observation: PartitionDispatcher.Observation) {
        metrics.observe(observation)
        observer?(observation)
        switch observation {
        case .tokenRemoved(let activity, let token, let reason):
            logger.info("Token removed", metadata: ["activity.id": "\(activity)", "apns.token": "\(token.hex)", "apns.reason": "\(reason)"])
        case .deadLettered(let letter):
            logger.info("Dead-lettered", metadata: ["dead_letter.reason": "\(letter.reason)", "activity.id": "\(letter.activityID?.rawValue ?? "")"])
        case .pushCompleted(let activity, let commands, _, _):
            logger.trace("Activity push completed", metadata: ["activity.id": "\(activity.activityID)", "activity.version": "\(activity.version)", "activity.commands": "\(commands)"])
        case .duplicateCommand(let activity, let commandID):
            logger.debug("Duplicate command acknowledged", metadata: ["activity.id": "\(activity)", "command.id": "\(commandID)"])
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
            case .resume: try? consumer.resume(readyPartitions())
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

    private func readyPartitions() -> [TopicPartition] {
        table.withLock { Array($0.runners.values) }.filter { !$0.isRestoring }.map(\.number).sorted().flatMap(coPartitions)
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
        try? consumer.pause(newly.flatMap(coPartitions))
        return newly
    }

    // MARK: Shutdown

    /// On shutdown: push what is held at once and wait, within
    /// `shutdown.timeout`, for every partition to be idle.
    private func drain() async {
        let runners = table.withLock { table in
            table.draining = true
            return Array(table.runners.values)
        }
        try? consumer.pause(runners.map(\.number).sorted().flatMap(coPartitions))
        for runner in runners { runner.apply { machine, now in machine.drain(now: now) } }
        let deadline = ContinuousClock.now + .seconds(configuration.shutdown.timeout)
        while ContinuousClock.now < deadline {
            if runners.allSatisfy(\.isIdle) {
                logger.info("Dispatcher drained")
                for runner in runners { runner.close() }
                return
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        for runner in runners { runner.close() }
        logger.warning("Shutdown timeout reached with work in flight; it is re-delivered to the next owner", metadata: ["shutdown.timeout": "\(configuration.shutdown.timeout)"])
    }
}
