import Kafka
import LiveDispatchCore

/// What the runners ask of the stage: the I/O of their machines, and
/// what the stage's machine follows (the records in progress, the demand
/// for sends, a partition caught up or settled).
extension Dispatcher: PartitionPort {
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
            logger.warning("Storing an offset failed; it is committed with a later one", metadata: ["kafka.partition": "\(partition)", "kafka.error": "\(error)"])
        }
    }

    func observe(_ observation: PartitionDispatcher.Observation) { reporter.observe(observation) }

    func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double) { reporter.pushSent(send, result, seconds: seconds) }

    func writeFailed(_ produce: PartitionDispatcher.Produce, _ error: KafkaError, attempt: Int) { reporter.writeFailed(produce, error, attempt: attempt) }

    func writeTraced(_ produce: PartitionDispatcher.Produce, _ report: KafkaDeliveryReport, started: UnixTime, ended: UnixTime) {
        reporter.tracing?.recordWrite(produce, report, started: started, ended: ended)
    }

    func countOutstanding(_ delta: Int) -> Int { outstandingTotal.add(delta, ordering: .relaxed).newValue }

    /// The records in progress over all partitions moved to `total`: the
    /// machine's gate decides, and its pause or resume is done before
    /// another decision of the gate is taken.
    func outstandingMoved(_ total: Int) {
        pauses.withLock { _ in decide { machine, _ in machine.outstandingMoved(to: total) } }
    }

    func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand) {
        decide { machine, _ in machine.demandChanged(number, demand) }
    }

    func caughtUp(_ number: Int32) {
        pauses.withLock { _ in decide { machine, _ in machine.caughtUp(number) } }
    }

    func settled(_ number: Int32) { changes.signal() }

    func changed() { changes.signal() }

    var reportsIdle: Bool { reportsIdleNow.load(ordering: .relaxed) }
}
