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
/// Every decision of the stage is its ``DispatchStage`` machine's, kept
/// under one lock with the table of runners and the timer armed at the
/// machine's next deadline; this shell performs the machine's actions
/// through its Kafka ports, made by a ``KafkaClientFactory``. Its other
/// jobs have types of their own: the runners' port (``PartitionServices``),
/// records into inputs (``RecordIntake``), restores (``ChangelogRestore``),
/// hand-overs (``HandOverWatch``, ``PartitionFollower``), the shutdown
/// (``DispatchShutdown``) and reporting (``DispatchReporter``).
public final class Dispatcher: Service, Sendable, PartitionServices.Stage {
    public typealias Observer = @Sendable (PartitionDispatcher.Observation) -> Void
    public typealias Phase = DispatchStage.Phase

    struct State: Sendable {
        var machine: DispatchStage
        var runners: [Int32: PartitionRunner] = [:]
        /// Armed at the machine's next deadline.
        var timer = MachineTimer<Scheduled<Void>>()
        /// Each partition's commands not read yet, as last measured (``backlogMirror``).
        var unread: [Int32: Int] = [:]
    }

    let configuration: WorkerConfiguration
    /// The group member: `commands`.
    let consumer: any ConsumerPort
    /// The co-partitions of the partitions held, the `commands` of those lingering, and the marks.
    let follower: PartitionFollower
    let producer: any ProducerPort
    let reader: any PartitionReaderPort
    let kafka: any KafkaClientFactory
    /// For the partition counts read at shutdown.
    let client: KafkaClientConfiguration
    /// What the runners ask of the worker; it forwards the stage's events here.
    let services: PartitionServices
    var sender: PushSender { services.sender }
    /// Creates and deletes broadcast activities' channels; nil refuses them.
    var channels: BroadcastChannels? { services.channels }
    let logger: Logger
    let metrics: WorkerMetrics
    var reporter: DispatchReporter { services.reporter }
    var clock: @Sendable () -> UnixTime { services.clock }
    let state: Mutex<State>
    /// Read on the router's hot path without the machine's lock: the sum of ``State/unread``.
    let backlogMirror = Atomic<Int>(0)
    /// Decisions whose I/O is still under way: the shutdown waits for none.
    let handOversUnderWay = Atomic<Int>(0)
    /// Taken around a decision that may pause or resume and its I/O, so a
    /// pause and a resume are done in the order they were decided.
    let pauses = Mutex<Void>(())
    /// Signalled when a decision was carried out, a revoked partition
    /// settles, the machine's deadline comes, and (while draining) a
    /// partition is idle: what the revocation handler, the hand-over watch
    /// and the shutdown wait for.
    var changes: ChangeSignal { services.changes }
    let eventLoops: any EventLoopGroup
    let stage: ConsumerStage
    let intake: RecordIntake

    /// - Parameter kafka: makes the consumers and the changelog reader (fakes in tests).
    /// - Parameter clock: the wall clock the machines are given (Unix time).
    public init(
        configuration: WorkerConfiguration, client: KafkaClientConfiguration, producer: any ProducerPort,
        sender: PushSender, channels: BroadcastChannels? = nil, logger: Logger, metrics: WorkerMetrics, observer: Observer? = nil,
        tracing: WorkerTracing? = nil, types: RuleSetStore? = nil,
        publishesOutcomes: Bool = true, webhook: (@Sendable (_ id: String, _ body: [UInt8]) -> Void)? = nil,
        kafka: any KafkaClientFactory = LibrdkafkaClients(), eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: @escaping @Sendable () -> UnixTime = { UnixTime(seconds: Date().timeIntervalSince1970) }
    ) throws(KafkaError) {
        self.configuration = configuration
        self.intake = RecordIntake(configuration: configuration, types: types, tracing: tracing, metrics: metrics)
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.groupID)
        consumerConfiguration.assignmentStrategy = .cooperativeSticky
        consumerConfiguration.autoCommitInterval = .seconds(1)
        consumerConfiguration.offsetReset = .earliest
        consumerConfiguration.client.properties = WorkerConfiguration.lowLatencyConsumerProperties.merging(client.properties) { _, given in given }
        var followerConfiguration = consumerConfiguration
        followerConfiguration.groupID = PartitionFollower.group(configuration.kafka.groupID)
        consumerConfiguration.groupInstanceID = configuration.kafka.instanceID.isEmpty ? nil : configuration.kafka.instanceID
        let revocations = RevocationRelay()
        self.consumer = try kafka.groupConsumer(
            consumerConfiguration, topics: [configuration.topic(.commands)], logger: logger,
            onRevocation: { partitions, lost in revocations.handler.withLock { $0 }?(partitions, lost) })
        self.follower = PartitionFollower(
            consumer: try kafka.assigningConsumer(followerConfiguration, logger: logger), group: consumer, configuration: configuration, logger: logger)
        self.state = Mutex(State(machine: DispatchStage(configuration: .init(
            ownership: .init(releaseTimeout: configuration.shutdown.releaseTimeout, lingerTimeout: configuration.shutdown.lingerTimeout),
            highWatermark: configuration.backpressure.highWatermark, lowWatermark: configuration.backpressure.lowWatermark,
            sendLimit: configuration.limits.maxInFlightPerWorker))))
        self.producer = producer
        self.kafka = kafka
        self.client = client
        self.reader = kafka.partitionReader(client, logger: logger)
        self.logger = logger
        self.metrics = metrics
        let reporter = DispatchReporter(
            configuration: configuration, logger: logger, metrics: metrics, observer: observer, tracing: tracing,
            outcomes: OutcomePublisher(
                producer: producer, topic: publishesOutcomes ? configuration.topic(.outcomes) : nil, metrics: metrics, webhook: webhook),
            clock: clock)
        self.services = PartitionServices(
            configuration: configuration, sender: sender, channels: channels, producer: producer, consumer: consumer, follower: follower,
            reporter: reporter, changes: ChangeSignal(eventLoop: eventLoopGroup.next()), clock: clock)
        self.eventLoops = eventLoopGroup
        self.stage = ConsumerStage(consumer: consumer)
        services.forward(to: self)
        revocations.handler.withLock { $0 = { [weak self] partitions, lost in guard let self else { return }; HandOverWatch(dispatcher: self).revoking(partitions, lost: lost) } }
    }

    /// Where the stage stands.
    public var phase: Phase { state.withLock { $0.machine.phase } }

    /// Called by the router stage on each assignment of its group: the worker
    /// is not ready before it has joined both groups.
    public func routerAssigned() {
        state.withLock { $0.machine.routerAssigned() }
    }

    /// Whether the worker can take its share: joined both groups and every
    /// held partition restored (a member that holds nothing is a ready standby).
    public var isReady: Bool {
        switch phase {
        case .ready, .standby: true
        case .joining, .restoring, .draining: false
        }
    }

    /// Whether nothing is in progress in any held partition.
    public var isIdle: Bool { runners.allSatisfy(\.isIdle) }

    var runners: [PartitionRunner] { state.withLock { Array($0.runners.values) } }

    func runner(_ number: Int32) -> PartitionRunner? { state.withLock { $0.runners[number] } }

    public typealias Status = DispatchStatus

    public var status: Status { Status(state.withLock(\.machine), outstanding: services.outstandingTotal.load(ordering: .relaxed)) }

    /// The state of `activity` held by this worker's partition that owns
    /// it, or nil when no restored partition of this worker holds it.
    public func activityState(_ activity: ActivityID) -> ActivityState? {
        for runner in runners {
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
        guard let runner = runner(partition), !runner.isRestoring else { return false }
        let next = runner.nextCommandOffset.load(ordering: .relaxed)
        let fetched = consumer.cachedEndOffset(commandsPartition(partition))
        guard state.withLock({ $0.machine.hasReadAll(partition, next: next, fetched: fetched) }) else { return false }
        return runner.state(of: activity) == nil && !runner.isClosed
    }

    /// The commands of this worker's partitions it has not read yet: the
    /// end of each partition as of its last fetch, or as far as this
    /// worker's router wrote it when that is further (a paused partition
    /// fetches nothing). The router counts them in its back-pressure, twice
    /// per event: a worker behind on dispatching stops routing, so its CPU
    /// goes to dispatching what is waiting. Records taken in and not
    /// finished do not count: they wait for their windows and their
    /// pushes, not for CPU. One atomic load: a partition's count is measured
    /// again when a command of it is taken in, when the router's write to it
    /// is acknowledged and when it is let go (``remeasure(_:in:)``).
    public var backlog: Int { backlogMirror.load(ordering: .relaxed) }

    /// Where a command this worker's router wrote landed.
    public func commandWritten(_ report: KafkaDeliveryReport) {
        state.withLock { state in
            state.machine.commandWritten(report.partition, offset: report.offset)
            remeasure(report.partition, in: &state)
        }
    }

    /// Measures the commands of `number` not read yet (none when no runner
    /// holds it) and moves ``backlogMirror`` by the difference; under the lock.
    func remeasure(_ number: Int32, in state: inout State) {
        var unread = 0
        if let runner = state.runners[number] {
            let next = runner.nextCommandOffset.load(ordering: .relaxed)
            unread = state.machine.unread(number, next: next, fetched: consumer.cachedEndOffset(commandsPartition(number)))
        }
        let before = state.unread.updateValue(unread, forKey: number) ?? 0
        if unread != before { backlogMirror.add(unread - before, ordering: .relaxed) }
        if unread == 0 { state.unread[number] = nil }
    }

    /// Sets `livedispatch_records_in_progress`, `livedispatch_sends_in_flight`,
    /// the APNs pools' gauges and the `process_*` series (CPU, memory,
    /// descriptors); called when metrics are scraped, so neither the hot
    /// path nor a timer updates them.
    public func recordBacklog() {
        reporter.recordGauges(sender: sender, outstanding: services.outstandingTotal.load(ordering: .relaxed), sendsInFlight: runners.reduce(0) { $0 + $1.sendsInFlight })
    }

    public func run() async throws {
        defer { state.withLock { $0.timer.disarm() }?.cancel() }
        let follower = self.follower.consumer
        try await stage.run(
            handle: { self.handle($0) },
            sideTasks: [{ await HandOverWatch(dispatcher: self).run() }, {
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
            drain: { await DispatchShutdown(dispatcher: self).drain() }, afterClose: { await DispatchShutdown(dispatcher: self).awaitHandOvers() })
    }

    // MARK: Consumer events

    func handle(_ event: KafkaConsumerEvent) {
        switch event {
        case .assigned(let partitions):
            let numbers = partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition)
            decide { machine, now in machine.assigned(numbers, now: now) }
        case .revoked(let partitions, let lost):
            // Released already by the revocation handler, unless the handler
            // ran before their assignment was handled here (both in one
            // quick rebalance): taken since, they are let go now.
            let numbers = partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition)
            decide { machine, now in machine.revoked(numbers, lost: lost, now: now) }
            logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(partitions.map(\.partition).sorted())", "kafka.lost": "\(lost)"])
            reportPartitions()
        case .record(let record):
            let topic = intake.topic(of: record)
            let runner = state.withLock { state in
                let runner = state.runners[record.partition]
                if let runner, topic == .commands {
                    runner.nextCommandOffset.store(record.offset + 1, ordering: .relaxed)
                    remeasure(record.partition, in: &state)
                }
                return runner
            }
            guard let runner else { return }
            intake.feed(record, of: topic, to: runner)
        }
    }

    /// Publishes how many partitions this worker holds in each phase; returns how many restore.
    @discardableResult
    func reportPartitions() -> Int {
        let status = status
        metrics.partitions(
            owned: status.partitions.count, restoring: status.restoring.count, lingering: status.lingering.count, releasing: status.releasing.count)
        return status.restoring.count
    }
}

/// Carries the group consumer's revocation handler to the dispatcher, which
/// exists only after the consumer it hands the handler to.
private final class RevocationRelay: Sendable {
    let handler = Mutex<KafkaConsumer.RevocationHandler?>(nil)
}
