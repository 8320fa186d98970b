import APNs
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTracing
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The router stage: consumes the domain topics the rules read (group
/// `<group_id>.router`), evaluates the rules in force and writes one
/// `ActivityCommand` per matched activity to `commands`, keyed by activity
/// id so every command of an activity lands in one partition. Events that
/// fail (not JSON, too large, a rule error) go to `dead-letters` with the
/// rule, the reason and the original record. An event's offset is committed
/// once everything it produced is acknowledged.
///
/// A partition the group moves elsewhere is routed on from where this router
/// stopped, without committing, until its new owner routes it
/// (``RoutingHandOver``), so a rebalance leaves no domain partition unrouted.
public final class Router: Service, Sendable {
    public typealias Observer = @Sendable (DeadLetter) -> Void

    /// The stage's machine and the one timer armed at its next deadline.
    struct Stage: Sendable {
        var machine: RoutingStage
        var timer = MachineTimer<Scheduled<Void>>()
    }

    let configuration: WorkerConfiguration
    let rules: RuleSetStore
    let client: KafkaClientConfiguration
    let consumer: any ConsumerPort
    let producer: any ProducerPort
    /// Made the consumers; asked for partition counts when leaving.
    let kafka: any KafkaClientFactory
    let logger: Logger
    let metrics: WorkerMetrics
    let observer: Observer?
    /// The dispatcher the commands are for; nil routes without back-pressure from it.
    let downstream: (any CommandsDownstream)?
    /// Spans of rule evaluation and command writes; nil when tracing is off.
    let tracing: WorkerTracing?
    let commandsTopic: String
    let topics: [String]
    let stage: Mutex<Stage>
    private let consumerStage: ConsumerStage
    /// Reads the partitions handed over (``RoutingStage``): no group, no commits.
    let lingering: any ConsumerPort
    /// The router's timers and async waits run here; its uptime is the stage machine's clock.
    private let eventLoop: any EventLoop
    /// The longest a partition given up is routed on: long enough for a
    /// broker's second cooperative round and the new owner's first commit.
    static let handOverLimit = Duration.seconds(30)
    /// How often the group's committed offsets of lingering partitions are
    /// read, while a hand-over is under way.
    static let handOverCheck = Duration.milliseconds(250)
    /// While routing is paused, how often the dispatcher's backlog is read
    /// again when no ``downstreamMoved()`` came.
    static let downstreamRecheck = Duration.milliseconds(50)
    /// The longest a stopping router routes what it owned (within
    /// `shutdown.timeout`): one rebalance of its group and the new owners'
    /// first commits. When the whole fleet stops nobody takes over, and each
    /// worker waits this long under traffic.
    static let leavingLimit = Duration.seconds(10)
    /// Outputs that Kafka refused for now, waiting out their backoff.
    private let retries: RetryTimer
    /// Signalled, while draining, when an event completes or partitions are
    /// revoked, and whenever a hand-over starts or stops or the stage
    /// stops: what the drain and the hand-over watch wait for.
    let changes: ChangeSignal
    /// Signalled when routing pauses and when the dispatcher's backlog
    /// moved while it is paused: what the back-pressure watch waits for.
    private let downstreamChanges: ChangeSignal

    /// - Parameter downstream: the worker's dispatcher: told of each
    ///   assignment of `<group_id>.router` and where each command landed;
    ///   its backlog counts in this stage's back-pressure, read with each
    ///   event routed or completed and, while routing is paused, at each
    ///   ``downstreamMoved()`` or after ``downstreamRecheck`` without one.
    /// - Parameter kafka: makes the group's consumer and the hand-over reader (fakes in tests).
    init(
        configuration: WorkerConfiguration, rules: RuleSetStore, client: KafkaClientConfiguration, producer: any ProducerPort,
        logger: Logger, metrics: WorkerMetrics, observer: Observer? = nil, downstream: (any CommandsDownstream)? = nil,
        tracing: WorkerTracing? = nil, kafka: any KafkaClientFactory = LibrdkafkaClients()
    ) throws(KafkaError) {
        self.configuration = configuration
        self.rules = rules
        self.client = client
        self.topics = rules.current.topics.sorted()
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.groupID + ".router")
        consumerConfiguration.offsetReset = .earliest
        consumerConfiguration.client.properties = WorkerConfiguration.lowLatencyConsumerProperties.merging(client.properties) { _, given in given }
        consumerConfiguration.groupInstanceID = configuration.kafka.instanceID.isEmpty ? nil : configuration.kafka.instanceID + ".router"
        // A partition's previous owner routes it until this commit shows the new one does.
        consumerConfiguration.autoCommitInterval = .seconds(1)
        var lingeringConfiguration = consumerConfiguration
        lingeringConfiguration.groupInstanceID = nil
        lingeringConfiguration.autoCommitInterval = nil
        self.consumer = try kafka.groupConsumer(consumerConfiguration, topics: topics, logger: logger, onRevocation: nil)
        self.lingering = try kafka.assigningConsumer(lingeringConfiguration, logger: logger)
        self.kafka = kafka
        self.producer = producer
        self.logger = logger
        self.metrics = metrics
        self.observer = observer
        self.downstream = downstream
        self.tracing = tracing
        self.commandsTopic = configuration.topic(.commands)
        self.stage = Mutex(Stage(machine: RoutingStage(gate: configuration.backpressureGate, handOverLimit: Self.handOverLimit)))
        self.consumerStage = ConsumerStage(consumer: consumer)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        self.eventLoop = eventLoop
        self.retries = RetryTimer(eventLoop: eventLoop)
        self.changes = ChangeSignal(eventLoop: eventLoop)
        self.downstreamChanges = ChangeSignal(eventLoop: eventLoop)
    }

    public func run() async throws {
        var sideTasks: [StageJob] = configuration.rules.reloadInterval > 0 ? [{ await self.reloadLoop() }] : []
        if downstream != nil { sideTasks.append { await self.watchDownstream() } }
        // Retries go on through the drain and stop with the stage: what
        // is still refused then stays uncommitted for the next owner.
        defer { retries.stop() }
        try await consumerStage.run(handle: { self.handle($0) }, sideTasks: sideTasks, drain: { await self.drain() })
    }

    func handle(_ event: KafkaConsumerEvent) {
        switch event {
        case .assigned(let partitions):
            input { stage, _ in stage.assigned(partitions.map(Self.tracked)) }
            downstream?.routerAssigned()
        case .revoked(let partitions, let lost):
            input { stage, now in stage.revoked(partitions.map(Self.tracked), lost: lost, now: now) }
            // Their events in progress no longer count.
            if stage.withLock(\.machine.isDraining) { changes.signal() }
        case .record(let record):
            route(record)
        }
    }

    /// The domain partitions this router routes: those its group assigns
    /// it, and those it gave up and routes on until their new owner does.
    public struct Status: Sendable {
        public var assigned: [TopicPartition]
        public var handingOver: [TopicPartition]
    }

    public var status: Status {
        stage.withLock { stage in
            Status(assigned: stage.machine.assigned.map(Self.topicPartition), handingOver: stage.machine.handingOver.map(Self.topicPartition))
        }
    }

    /// Evaluates one event and enqueues what it produces, in event order.
    /// `tracked`: read by the group's consumer, so its offset is committed
    /// once its outputs are stored (not for a partition routed during a hand-over).
    func route(_ record: KafkaRecord, tracked isTracked: Bool = true) {
        let now = UnixTime(seconds: Date().timeIntervalSince1970)
        let tracked = OffsetTracker.Partition(topic: record.topic, number: record.partition)
        metrics.recordConsumed(record.topic)
        let evaluation = startEvaluation(of: record)
        let outputs = traced(outputs(for: record, now: now), under: evaluation)
        logger.trace("Event routed", metadata: Logger.Metadata.trace(evaluation?.traceContext).merging([
            "kafka.source": "\(record.topic)[\(record.partition)]@\(record.offset)", "router.outputs": "\(outputs.count)",
        ]) { own, _ in own })
        var deliveries: [(Output, Result<KafkaPendingDelivery, KafkaError>)] = []
        let waiting = downstream?.backlog ?? 0
        input { stage, now in
            // Enqueued under the lock so that records keep the order of their events.
            for output in outputs { deliveries.append((output, enqueue(output))) }
            return stage.read(tracked, offset: record.offset, tracked: isTracked, downstream: waiting, now: now)
        }
        guard !deliveries.isEmpty else {
            if isTracked { complete(tracked, offset: record.offset) }
            return
        }
        let event = RoutedEvent(record: record, committing: isTracked ? tracked : nil, outputs: deliveries.count)
        for (output, first) in deliveries { watch(output, first, event: event, attempt: 0) }
    }

    /// An event whose outputs are not all stored yet: its offset completes
    /// when the last one is.
    final class RoutedEvent: Sendable {
        let record: KafkaRecord
        /// The partition whose commit position it holds back; nil for a
        /// record routed during a hand-over, which is never committed.
        let committing: OffsetTracker.Partition?
        private let remaining: Atomic<Int>

        init(record: KafkaRecord, committing: OffsetTracker.Partition?, outputs: Int) {
            self.record = record
            self.committing = committing
            self.remaining = Atomic(outputs)
        }

        /// One output stored; true when it was the last.
        func stored() -> Bool {
            remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
        }
    }

    /// Follows one output to its acknowledgement without a task: the
    /// delivery report completes the event on librdkafka's delivery thread.
    /// A refusal (rare) waits out its backoff on the one ``RetryTimer``; a
    /// dead letter takes a task.
    private func watch(_ output: Output, _ pending: Result<KafkaPendingDelivery, KafkaError>, event: RoutedEvent, attempt: Int) {
        switch pending {
        case .success(let delivery):
            delivery.whenComplete { [self] result in
                switch result {
                case .success(let report):
                    if let downstream, report.topic == commandsTopic { downstream.commandWritten(report) }
                    output.span?.end()
                    stored(event)
                case .failure(let error): refused(output, error, event: event, attempt: attempt)
                }
            }
        case .failure(let error):
            refused(output, error, event: event, attempt: attempt)
        }
    }

    private func stored(_ event: RoutedEvent) {
        if event.stored(), let partition = event.committing { complete(partition, offset: event.record.offset) }
    }

    /// Kafka refused an output (after librdkafka's own retries), or its
    /// queue was full. A command sent twice is harmless: applying the same
    /// patch again gives the same state. A record refused for good (too
    /// large, an invalid topic) is never retried: a command becomes a dead
    /// letter of its event, and a dead letter that cannot be written either
    /// is counted, logged and given up, so the event completes. Transient
    /// failures are retried with a backoff until shutdown, which leaves the
    /// event uncommitted.
    private func refused(_ output: Output, _ error: KafkaError, event: RoutedEvent, attempt: Int) {
        let record = event.record
        let source = "\(record.topic)[\(record.partition)]@\(record.offset)"
        if error.isPermanent {
            output.span?.recordError(error)
            output.span?.end()
            metrics.writeDropped(topic: output.topic)
            logger.error("Kafka refused a routed record for good; not retrying", metadata: [
                "kafka.topic": "\(output.topic)", "kafka.source": "\(source)", "kafka.error": "\(error)", "kafka.bytes": "\(output.value.count)",
            ])
            if output.topic == configuration.topic(.deadLetters) {
                stored(event)
                return
            }
            let letter = deadLetter(
                for: record, reason: .produceRefused, message: "Kafka refused the record produced for this event: \(error)", rule: nil,
                now: UnixTime(seconds: Date().timeIntervalSince1970))
            consumerStage.schedule { [self] in watch(letter, enqueue(letter), event: event, attempt: 0) }
            return
        }
        let next = attempt + 1
        logger.error("Writing a routed record failed; retrying", metadata: [
            "kafka.topic": "\(output.topic)", "kafka.source": "\(source)", "kafka.error": "\(error)", "kafka.attempt": "\(next)",
        ])
        retries.schedule(after: Backoff.kafkaWrite.ceiling(attempt: next)) { [self] in
            watch(output, enqueue(output), event: event, attempt: next)
        }
    }

    private func enqueue(_ output: Output) -> Result<KafkaPendingDelivery, KafkaError> {
        Result { () throws(KafkaError) in try producer.enqueue(topic: output.topic, key: output.key, value: output.value, partition: nil, headers: output.headers) }
    }

    private func complete(_ partition: OffsetTracker.Partition, offset: Int64) {
        let waiting = downstream?.backlog ?? 0
        input { stage, _ in stage.completed(partition, offset: offset, downstream: waiting) }
        if stage.withLock(\.machine.isDraining) { changes.signal() }
    }

    /// Feeds the stage's machine one input at the router's clock, re-arms
    /// its timer at its next deadline, and performs its actions after
    /// releasing the lock.
    func input(_ input: (inout RoutingStage, UnixTime) -> [RoutingStage.Action]) {
        let now = eventLoop.uptime
        let (actions, replaced) = stage.withLock { stage in
            let actions = input(&stage.machine, now)
            return (actions, rearm(&stage, now: now))
        }
        replaced?.cancel()
        perform(actions)
    }

    private func rearm(_ stage: inout Stage, now: UnixTime) -> Scheduled<Void>? {
        stage.timer.arm(at: stage.machine.nextDeadline, now: now, on: eventLoop) { [weak self] number in self?.timerFired(number) }
    }

    /// The armed timer is spent once it fired; a replaced timer that ran
    /// anyway leaves the armed one alone.
    private func timerFired(_ number: UInt64) {
        let now = eventLoop.uptime
        let (actions, replaced) = stage.withLock { stage -> ([RoutingStage.Action], Scheduled<Void>?) in
            guard stage.timer.fired(number) else { return ([], nil) }
            return (stage.machine.timerFired(now: now), rearm(&stage, now: now))
        }
        replaced?.cancel()
        perform(actions)
    }

    private func perform(_ actions: [RoutingStage.Action]) {
        var handOvers = false
        for action in actions {
            switch action {
            case .pause(let partitions):
                // Assigned while paused: they wait with the others.
                try? consumer.pause(partitions.map(Self.topicPartition))
            case .pauseAll:
                try? consumer.pause(Array(consumer.assignment))
                try? lingering.pause(Array(lingering.assignment))
                metrics.routerPaused(true)
                downstreamChanges.signal()
            case .resumeAll:
                try? consumer.resume(Array(consumer.assignment))
                try? lingering.resume(Array(lingering.assignment))
                metrics.routerPaused(false)
            case .commit(let partition, let offset):
                try? consumer.storeOffsets([KafkaCommitOffset(topicPartition: Self.topicPartition(partition), offset: offset)])
            case .startHandOver(let partition, let offset, let paused):
                handOvers = true
                let topicPartition = Self.topicPartition(partition)
                do {
                    try lingering.assign([topicPartition], offsets: [topicPartition: offset])
                    if paused { try? lingering.pause([topicPartition]) }
                    logger.info("Routing a partition given up until its new owner routes it", metadata: [
                        "kafka.partition": "\(topicPartition)", "kafka.offset": "\(offset)",
                    ])
                } catch {
                    logger.warning("Could not go on routing a partition given up", metadata: ["kafka.partition": "\(topicPartition)", "error": "\(error)"])
                }
            case .stopHandOver(let partition, let reason):
                handOvers = true
                let topicPartition = Self.topicPartition(partition)
                try? lingering.unassign([topicPartition])
                logger.info("Stopped routing a partition given up", metadata: ["kafka.partition": "\(topicPartition)", "router.reason": "\(reason)"])
            }
        }
        if handOvers { changes.signal() }
    }

    static func tracked(_ partition: TopicPartition) -> OffsetTracker.Partition {
        OffsetTracker.Partition(topic: partition.topic, number: partition.partition)
    }

    static func topicPartition(_ partition: OffsetTracker.Partition) -> TopicPartition {
        TopicPartition(topic: partition.topic, partition: partition.number)
    }

    /// The dispatcher's backlog may have fallen: while routing is paused,
    /// the back-pressure watch reads it again now. Cheap when routing runs.
    public func downstreamMoved() {
        guard stage.withLock(\.machine.isPaused) else { return }
        downstreamChanges.signal()
    }

    /// Resumes routing, and logs its pauses and resumes, as the
    /// dispatcher's backlog falls while routing is paused: no event of this
    /// stage comes or completes then to decide it. While routing runs it
    /// waits for a pause; while paused it reads the backlog at each
    /// ``downstreamMoved()``, or after ``downstreamRecheck`` without one.
    private func watchDownstream() async {
        guard let downstream else { return }
        var wasPaused = false
        while !Task.isCancelled {
            let seen = downstreamChanges.generation
            let paused = stage.withLock(\.machine.isPaused)
            guard paused || wasPaused else {
                await downstreamChanges.wait(after: seen, timeout: nil)
                continue
            }
            await downstreamChanges.wait(after: seen, timeout: Self.downstreamRecheck)
            guard !Task.isCancelled else { return }
            let waiting = downstream.backlog
            input { stage, _ in stage.downstream(waiting) }
            let (pausedNow, outstanding) = stage.withLock { ($0.machine.isPaused, $0.machine.outstanding) }
            guard pausedNow != wasPaused else { continue }
            wasPaused = pausedNow
            logger.info(pausedNow ? "Routing paused: the worker is behind" : "Routing resumed", metadata: [
                "router.in_progress": "\(outstanding)", "dispatcher.backlog": "\(waiting)",
            ])
        }
    }

    /// Checks the rules directory and swaps in a changed, valid rule set.
    private func reloadLoop() async {
        var fingerprint = RuleDirectoryFingerprint(directory: configuration.rules.path)
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(configuration.rules.reloadInterval))
            let current = RuleDirectoryFingerprint(directory: configuration.rules.path)
            guard current != fingerprint else { continue }
            fingerprint = current
            switch rules.reload(from: configuration.rules.path) {
            case .success(let ruleSet):
                logger.notice("Rules reloaded", metadata: ["rules.count": "\(ruleSet.ruleNames.count)", "rules.generation": "\(rules.generation)"])
                let added = ruleSet.topics.subtracting(topics)
                if !added.isEmpty {
                    logger.warning("Reloaded rules read topics this worker does not consume yet; restart to subscribe", metadata: ["rules.new_topics": "\(added.sorted())"])
                }
            case .failure(let error):
                logger.error("Rules not reloaded: the new files have problems; the previous rules stay in force", metadata: ["rules.problems": "\(error)"])
            }
        }
    }

    // MARK: Stopping

    /// Stops reading for the group: what was read is finished and committed
    /// when the consumer closes. When other workers will take the
    /// partitions over, each goes on being routed from where this router
    /// stopped until they do (``RoutingHandOver/leaving(_:now:within:)``).
    private func drain() async {
        let assignment = Array(consumer.assignment)
        let owned = stage.withLock { $0.machine.drain(owned: assignment.map(Self.tracked)) }
        try? consumer.pause(assignment)
        if await kafka.othersMayTakeOver(topics, held: owned.count, configuration: client, logger: logger) {
            let within = min(.seconds(configuration.shutdown.timeout), Self.leavingLimit)
            input { stage, now in stage.leaving(owned, now: now, within: within) }
        }
        // Each event completing signals ``changes`` from here on.
        let deadline = ContinuousClock.now + .seconds(configuration.shutdown.timeout)
        while !Task.isCancelled {
            let seen = changes.generation
            guard stage.withLock(\.machine.outstanding) > 0 else { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            await changes.wait(after: seen, timeout: left)
        }
    }
}
