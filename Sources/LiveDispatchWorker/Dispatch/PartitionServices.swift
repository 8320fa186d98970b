import Kafka
import LiveDispatchCore
import Synchronization

/// What the dispatcher's runners ask of the worker (``PartitionPort``):
/// the clock, the push sender and broadcast channels, writes through the
/// producer, offsets stored on the consumer that reads each topic, the
/// reporter, and the count of records in progress over all partitions.
/// The events the stage's machine follows (the count moved, a partition's
/// demand for sends, a partition caught up) go on to the ``Dispatcher``,
/// which decides; the rest is done here.
final class PartitionServices: PartitionPort {
    /// The stage the machine's events go to.
    protocol Stage: AnyObject, Sendable {
        func outstandingMoved(_ total: Int)
        func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand)
        func caughtUp(_ number: Int32)
    }

    private struct WeakStage: Sendable {
        weak var stage: (any Stage)?
    }

    let configuration: WorkerConfiguration
    let sender: PushSender
    /// Creates and deletes broadcast activities' channels; nil refuses them.
    let channels: BroadcastChannels?
    let producer: any ProducerPort
    /// The group member, which stores the offsets of `commands`.
    let consumer: any ConsumerPort
    /// Stores the offsets of the co-partitions.
    let follower: PartitionFollower
    let reporter: DispatchReporter
    let clock: @Sendable () -> UnixTime
    /// Signalled when a revoked partition settles, and (while ``reportsIdle``) when a partition is idle.
    let changes: ChangeSignal
    /// Records in progress over all partitions, read without any lock.
    let outstandingTotal = Atomic<Int>(0)
    /// Set when the dispatcher drains: each runner then signals ``changes`` when an input leaves it idle.
    let reportsIdleNow = Atomic<Bool>(false)
    /// Set once, by the dispatcher that owns these services.
    private let stage = Mutex(WeakStage())

    init(
        configuration: WorkerConfiguration, sender: PushSender, channels: BroadcastChannels?, producer: any ProducerPort,
        consumer: any ConsumerPort, follower: PartitionFollower, reporter: DispatchReporter, changes: ChangeSignal,
        clock: @escaping @Sendable () -> UnixTime
    ) {
        self.configuration = configuration
        self.sender = sender
        self.channels = channels
        self.producer = producer
        self.consumer = consumer
        self.follower = follower
        self.reporter = reporter
        self.changes = changes
        self.clock = clock
    }

    func forward(to stage: any Stage) { self.stage.withLock { $0.stage = stage } }

    private var forwardee: (any Stage)? { stage.withLock { $0.stage } }

    var now: UnixTime { clock() }

    func jitter() -> Double { Double.random(in: 0..<1) }

    func channel(_ request: PartitionDispatcher.ChannelRequest, done: @escaping @Sendable (BroadcastChannels.Report) -> Void) {
        guard let channels else {
            if case .create(let activity, _, _, _) = request {
                done(.createFailed(activity, reason: "this worker manages no broadcast channels", retryable: false))
            }
            return
        }
        channels.perform(request, done: done)
    }

    func enqueue(_ produce: PartitionDispatcher.Produce, partition number: Int32) -> Result<KafkaPendingDelivery, KafkaError> {
        Result { () throws(KafkaError) in
            try producer.enqueue(
                topic: configuration.topic(produce.topic), key: Array(produce.key.utf8), value: produce.value, partition: produce.partition)
        }
    }

    func commit(_ topic: InternalTopic, partition number: Int32, offset: Int64) {
        let partition = TopicPartition(topic: configuration.topic(topic), partition: number)
        do {
            try (topic == .commands ? consumer : follower.consumer).storeOffsets([KafkaCommitOffset(topicPartition: partition, offset: offset)])
        } catch {
            reporter.logger.warning(
                "Storing an offset failed; it is committed with a later one", metadata: ["kafka.partition": "\(partition)", "kafka.error": "\(error)"])
        }
    }

    func observe(_ observation: PartitionDispatcher.Observation) { reporter.observe(observation) }

    func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double) { reporter.pushSent(send, result, seconds: seconds) }

    func writeFailed(_ produce: PartitionDispatcher.Produce, _ error: KafkaError, attempt: Int) { reporter.writeFailed(produce, error, attempt: attempt) }

    func writeTraced(_ produce: PartitionDispatcher.Produce, _ report: KafkaDeliveryReport, started: UnixTime, ended: UnixTime) {
        reporter.tracing?.recordWrite(produce, report, started: started, ended: ended)
    }

    func countOutstanding(_ delta: Int) -> Int { outstandingTotal.add(delta, ordering: .relaxed).newValue }

    func outstandingMoved(_ total: Int) { forwardee?.outstandingMoved(total) }

    func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand) { forwardee?.demandChanged(number, demand) }

    func caughtUp(_ number: Int32) { forwardee?.caughtUp(number) }

    func settled(_ number: Int32) { changes.signal() }

    func changed() { changes.signal() }

    var reportsIdle: Bool { reportsIdleNow.load(ordering: .relaxed) }
}
