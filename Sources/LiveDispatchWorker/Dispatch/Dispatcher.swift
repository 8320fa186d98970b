import APNs
import Foundation
import Kafka
import LiveDispatchCore
import Logging
import ServiceLifecycle
import Synchronization

/// The dispatcher stage: consumes the co-partitioned `commands` and `tokens`
/// topics in the worker group and, for each assigned partition number,
/// restores its `state` and `token-store` changelogs, then runs a
/// ``PartitionDispatcher`` over its records, sending pushes through the
/// APNs pools and writing snapshots, token changes and dead letters.
///
/// The `range` assignor keeps partition N of `commands` and of `tokens` with
/// the same member, which is what makes an activity's tokens and commands
/// meet in one place.
public final class Dispatcher: Service, Sendable {
    public typealias Observer = @Sendable (PartitionDispatcher.Observation) -> Void

    struct Slot: Sendable {
        var epoch: UInt64
        var machine: PartitionDispatcher
    }

    struct State: Sendable {
        var slots: [Int32: Slot] = [:]
        var nextEpoch: UInt64 = 1
        var gate: BackpressureGate
        var restoring: Set<Int32> = []
        var draining = false
    }

    let configuration: WorkerConfiguration
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let reader: KafkaPartitionReader
    let sender: PushSender
    let logger: Logger
    let metrics: WorkerMetrics
    let observer: Observer?
    private let state: Mutex<State>
    private let stage: ConsumerStage

    public init(
        configuration: WorkerConfiguration, client: KafkaClientConfiguration, producer: KafkaProducer,
        sender: PushSender, logger: Logger, metrics: WorkerMetrics, observer: Observer? = nil
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
            topics: [configuration.topic(.commands), configuration.topic(.tokens)], logger: logger)
        self.producer = producer
        self.reader = KafkaPartitionReader(configuration: client, logger: logger)
        self.sender = sender
        self.logger = logger
        self.metrics = metrics
        self.observer = observer
        self.state = Mutex(State(gate: configuration.backpressureGate))
        self.stage = ConsumerStage(consumer: consumer)
    }

    /// Whether every assigned partition has finished restoring.
    public var isReady: Bool {
        state.withLock { $0.restoring.isEmpty && !$0.draining }
    }

    /// Whether nothing is in progress in any owned partition.
    public var isIdle: Bool {
        state.withLock { $0.slots.values.allSatisfy { $0.machine.isIdle } }
    }

    /// Partitions owned and the records in progress, for the admin endpoint.
    public var status: (partitions: [Int32], outstanding: Int, paused: Bool) {
        state.withLock { state in
            (state.slots.keys.sorted(), state.slots.values.reduce(0) { $0 + $1.machine.outstanding }, state.gate.isPaused)
        }
    }

    public func run() async throws {
        try await stage.run(handle: { self.handle($0) }, sideTasks: [{ await self.sweepLoop() }], drain: { await self.drain() })
    }

    // MARK: Consumer events

    func handle(_ event: KafkaConsumerEvent) {
        switch event {
        case .assigned(let partitions):
            let numbers = Set(partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition))
            for number in numbers.sorted() { assign(number) }
        case .revoked(let partitions, let lost):
            let numbers = Set(partitions.map(\.partition))
            state.withLock { state in
                for number in numbers {
                    state.slots.removeValue(forKey: number)
                    state.restoring.remove(number)
                }
            }
            logger.info("Partitions revoked", metadata: ["kafka.partitions": "\(numbers.sorted())", "kafka.lost": "\(lost)"])
            metrics.assignedPartitions(state.withLock { $0.slots.count })
        case .record(let record):
            let now = UnixTime(seconds: Date().timeIntervalSince1970)
            let input = PartitionDispatcher.Record(
                offset: record.offset, key: record.key, value: record.value,
                timestamp: record.timestampMilliseconds.map { UnixTime(seconds: Double($0) / 1000) } ?? now)
            let isCommand = record.topic == configuration.topic(.commands)
            metrics.recordConsumed(isCommand ? "commands" : "tokens")
            run(partition: record.partition) { machine in
                isCommand ? machine.command(input, now: now) : machine.tokenRecord(input, now: now)
            }
        }
    }

    private func assign(_ number: Int32) {
        let epoch: UInt64 = state.withLock { state in
            let epoch = state.nextEpoch
            state.nextEpoch += 1
            state.slots[number] = Slot(epoch: epoch, machine: PartitionDispatcher(partition: number, configuration: configuration))
            state.restoring.insert(number)
            return epoch
        }
        let partitions = coPartitions(number)
        do { try consumer.pause(partitions) } catch { logger.warning("Pausing a partition for its restore failed", metadata: ["kafka.error": "\(error)"]) }
        logger.info("Partition assigned; restoring its state and tokens", metadata: ["kafka.partition": "\(number)"])
        metrics.assignedPartitions(state.withLock { $0.slots.count })
        stage.schedule { [self] in await restore(number, epoch: epoch) }
    }

    private func coPartitions(_ number: Int32) -> [TopicPartition] {
        [TopicPartition(topic: configuration.topic(.commands), partition: number),
         TopicPartition(topic: configuration.topic(.tokens), partition: number)]
    }

    /// Reads the partition's `state` and `token-store` changelogs to their end, then lets its records flow.
    private func restore(_ number: Int32, epoch: UInt64) async {
        let started = ContinuousClock.now
        var attempt = 0
        while true {
            guard state.withLock({ $0.slots[number]?.epoch == epoch }) else { return }
            do {
                var states = 0
                var tokens = 0
                try await reader.readToEnd(topic: configuration.topic(.state), partition: number) { record in
                    let key = String(decoding: record.key ?? [], as: UTF8.self)
                    self.withSlot(number, epoch: epoch) { $0.restoreState(key: key, value: record.value) }
                    states += 1
                }
                try await reader.readToEnd(topic: configuration.topic(.tokenStore), partition: number) { record in
                    let key = String(decoding: record.key ?? [], as: UTF8.self)
                    self.withSlot(number, epoch: epoch) { $0.restoreToken(key: key, value: record.value) }
                    tokens += 1
                }
                let now = UnixTime(seconds: Date().timeIntervalSince1970)
                let restored: Bool = state.withLock { state in
                    guard state.slots[number]?.epoch == epoch else { return false }
                    state.restoring.remove(number)
                    return true
                }
                guard restored else { return }
                run(partition: number, epoch: epoch) { $0.finishRestore(now: now) }
                let paused = state.withLock { $0.gate.isPaused }
                if !paused { try? consumer.resume(coPartitions(number)) }
                logger.info("Partition restored", metadata: [
                    "kafka.partition": "\(number)", "restore.states": "\(states)", "restore.tokens": "\(tokens)",
                    "restore.seconds": "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                ])
                return
            } catch {
                attempt += 1
                logger.error("Restoring a partition failed; retrying", metadata: ["kafka.partition": "\(number)", "kafka.error": "\(error)", "restore.attempt": "\(attempt)"])
                try? await Task.sleep(for: .seconds(min(30, 0.5 * Double(1 << min(attempt, 6)))))
            }
        }
    }

    private func withSlot(_ number: Int32, epoch: UInt64, _ body: (inout PartitionDispatcher) -> Void) {
        state.withLock { state in
            // Taken out while mutated, so the machine's storage is not copied.
            guard state.slots[number]?.epoch == epoch, var slot = state.slots.removeValue(forKey: number) else { return }
            body(&slot.machine)
            state.slots[number] = slot
        }
    }

    // MARK: Actions

    /// Feeds one input to a partition's machine under the lock, then performs
    /// the actions outside it. Records to write are enqueued with the
    /// producer under the lock (a non-blocking call), so a partition's
    /// snapshots, token changes and dead letters reach Kafka in the order the
    /// machine decided them; only the wait for their acknowledgement is outside.
    func run(partition number: Int32, epoch: UInt64? = nil, _ input: (inout PartitionDispatcher) -> [PartitionDispatcher.Action]) {
        var enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>] = [:]
        let result: (UInt64, [PartitionDispatcher.Action], BackpressureGate.Action, [Int32])? = state.withLock { state in
            guard let current = state.slots[number]?.epoch, epoch == nil || current == epoch,
                  var slot = state.slots.removeValue(forKey: number)
            else { return nil }
            // Taken out of the dictionary while mutated, so the machine's storage is not copied.
            let actions = input(&slot.machine)
            state.slots[number] = slot
            for case .produce(let produce) in actions {
                enqueued[produce.ticket] = enqueue(produce)
            }
            let outstanding = state.slots.values.reduce(0) { $0 + $1.machine.outstanding }
            let gate = state.gate.update(outstanding: outstanding)
            let ready = state.slots.keys.filter { !state.restoring.contains($0) }
            return (slot.epoch, actions, gate, ready)
        }
        guard let (slotEpoch, actions, gate, ready) = result else { return }
        perform(actions, enqueued: enqueued, partition: number, epoch: slotEpoch)
        applyBackpressure(gate, ready: ready)
    }

    private func applyBackpressure(_ action: BackpressureGate.Action, ready: [Int32]) {
        let partitions = ready.sorted().flatMap(coPartitions)
        switch action {
        case .none:
            return
        case .pause:
            logger.notice("Backlog above the high watermark; pausing partitions", metadata: ["backpressure.high": "\(configuration.backpressure.highWatermark)"])
            metrics.paused(true)
            try? consumer.pause(partitions)
        case .resume:
            logger.notice("Backlog below the low watermark; resuming partitions", metadata: ["backpressure.low": "\(configuration.backpressure.lowWatermark)"])
            metrics.paused(false)
            try? consumer.resume(partitions)
        }
    }

    private func enqueue(_ produce: PartitionDispatcher.Produce) -> Result<KafkaPendingDelivery, KafkaError> {
        Result { () throws(KafkaError) in
            try producer.enqueue(
                topic: configuration.topic(produce.topic), key: Array(produce.key.utf8), value: produce.value,
                partition: produce.partition)
        }
    }

    private func perform(
        _ actions: [PartitionDispatcher.Action], enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>],
        partition number: Int32, epoch: UInt64
    ) {
        for action in actions {
            switch action {
            case .send(let send):
                stage.schedule { [self] in
                    let started = ContinuousClock.now
                    let (outcome, raw) = await sender.send(send)
                    metrics.pushSent(raw, seconds: (ContinuousClock.now - started).seconds)
                    if case .misconfigured(let error) = raw {
                        logger.error("APNs refuses every push: fix the configuration", metadata: ["apns.error": "\(error)"])
                    }
                    let now = UnixTime(seconds: Date().timeIntervalSince1970)
                    run(partition: number, epoch: epoch) { $0.sendCompleted(send, outcome: outcome, now: now, jitter: Double.random(in: 0..<1)) }
                }
            case .produce(let produce):
                let first = enqueued[produce.ticket]
                stage.schedule { [self] in
                    await write(produce, first: first, partition: number, epoch: epoch)
                }
            case .scheduleFlush(let activity, let at):
                stage.schedule { [self] in
                    await sleep(until: at)
                    run(partition: number, epoch: epoch) { $0.flushTimer(for: activity, now: UnixTime(seconds: Date().timeIntervalSince1970)) }
                }
            case .scheduleRetry(let activity, let at):
                stage.schedule { [self] in
                    await sleep(until: at)
                    run(partition: number, epoch: epoch) { $0.retryTimer(for: activity, now: UnixTime(seconds: Date().timeIntervalSince1970)) }
                }
            case .commit(let topic, let offset):
                let partition = TopicPartition(topic: configuration.topic(topic), partition: number)
                do {
                    try consumer.storeOffsets([KafkaCommitOffset(topicPartition: partition, offset: offset)])
                } catch {
                    logger.warning("Storing an offset failed; it is committed with a later one", metadata: ["kafka.partition": "\(partition)", "kafka.error": "\(error)"])
                }
            case .observe(let observation):
                metrics.observe(observation)
                observer?(observation)
                switch observation {
                case .tokenRemoved(let activity, let token, let reason):
                    logger.info("Token removed", metadata: ["activity.id": "\(activity)", "apns.token": "\(token.hex)", "apns.reason": "\(reason)"])
                case .deadLettered(let letter):
                    logger.info("Dead-lettered", metadata: ["dead_letter.reason": "\(letter.reason)", "activity.id": "\(letter.activityID?.rawValue ?? "")"])
                case .pushCompleted, .activityExpired:
                    break
                }
            }
        }
    }

    /// Waits for a record's acknowledgement; when Kafka refused it (after
    /// librdkafka's own retries within its delivery timeout), enqueues it
    /// again with a backoff until it is taken or the partition is gone, so no
    /// snapshot, token change or dead letter is ever skipped.
    private func write(
        _ produce: PartitionDispatcher.Produce, first: Result<KafkaPendingDelivery, KafkaError>?, partition number: Int32, epoch: UInt64
    ) async {
        var attempt = 0
        var pending = first ?? enqueue(produce)
        while true {
            do {
                _ = try await pending.get().wait()
                let now = UnixTime(seconds: Date().timeIntervalSince1970)
                run(partition: number, epoch: epoch) { $0.acknowledged(produce.ticket, now: now) }
                return
            } catch {
                attempt += 1
                guard state.withLock({ $0.slots[number]?.epoch == epoch }) else { return }
                logger.error("Writing to Kafka failed; retrying", metadata: [
                    "kafka.topic": "\(configuration.topic(produce.topic))", "kafka.error": "\(error)", "kafka.attempt": "\(attempt)",
                ])
                try? await Task.sleep(for: .seconds(min(30, 0.2 * Double(1 << min(attempt, 8)))))
                pending = enqueue(produce)
            }
        }
    }

    private func sleep(until time: UnixTime) async {
        let delay = time.seconds - Date().timeIntervalSince1970
        if delay > 0 { try? await Task.sleep(for: .seconds(delay)) }
    }

    /// Expires activities and tokens every few seconds.
    private func sweepLoop() async {
        while !Task.isCancelled && !state.withLock({ $0.draining }) {
            try? await Task.sleep(for: .seconds(5))
            let now = UnixTime(seconds: Date().timeIntervalSince1970)
            for number in state.withLock({ Array($0.slots.keys) }) {
                run(partition: number) { $0.sweep(now: now) }
            }
        }
    }

    /// On shutdown: push what is held at once and wait, within
    /// `shutdown.timeout`, for every partition to be idle.
    private func drain() async {
        let owned = state.withLock { state in
            state.draining = true
            return state.slots.keys.sorted()
        }
        try? consumer.pause(owned.flatMap(coPartitions))
        let now = UnixTime(seconds: Date().timeIntervalSince1970)
        for number in state.withLock({ Array($0.slots.keys) }) {
            run(partition: number) { $0.drain(now: now) }
        }
        let deadline = ContinuousClock.now + .seconds(configuration.shutdown.timeout)
        while ContinuousClock.now < deadline {
            if state.withLock({ $0.slots.values.allSatisfy { $0.machine.isIdle } }) {
                logger.info("Dispatcher drained")
                return
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        logger.warning("Shutdown timeout reached with work in flight; it is re-delivered to the next owner", metadata: ["shutdown.timeout": "\(configuration.shutdown.timeout)"])
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
