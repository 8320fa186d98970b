import Foundation
import Kafka
import LiveDispatchCore
import Logging

/// Where the dispatcher stage's observations go: metrics, logs, spans,
/// outcomes (topic and webhook) and the worker's observer. It decides
/// nothing; the machines do.
struct DispatchReporter: Sendable {
    let configuration: WorkerConfiguration
    let logger: Logger
    let metrics: WorkerMetrics
    let observer: Dispatcher.Observer?
    /// Spans of pushes and APNs requests; nil when tracing is off.
    let tracing: WorkerTracing?
    let outcomes: OutcomePublisher
    let clock: @Sendable () -> UnixTime

    /// Sets the pools' gauges, the `process_*` series, the records in
    /// progress and the sends in flight (against the worker's limit).
    func recordGauges(sender: PushSender, outstanding: Int, sendsInFlight: Int) {
        sender.recordGauges()
        if let statistics = ProcessStatistics.current() { metrics.process(statistics) }
        metrics.backlog(outstanding)
        metrics.sendsInFlight(sendsInFlight, limit: configuration.limits.maxInFlightPerWorker)
    }

    /// What a partition machine observed.
    func observe(_ observation: PartitionDispatcher.Observation) {
        metrics.observe(observation)
        observer?(observation)
        outcomes.publish(observation, now: clock())
        switch observation {
        case .tokenRemoved(let activity, let token, let reason):
            logger.info("Token removed", metadata: ["activity.id": "\(activity)", "apns.token": "\(token.hex)", "apns.reason": "\(reason)"])
        case .deadLettered(let letter):
            logger.info("Dead-lettered", metadata: ["dead_letter.reason": "\(letter.reason)", "activity.id": "\(letter.activityID?.rawValue ?? "")"])
        case .pushCompleted(let activity, let commands, _, _, _):
            logger.trace("Activity push completed", metadata: [
                "activity.id": "\(activity.activityID)", "activity.version": "\(activity.version)", "activity.commands": "\(commands)",
            ])
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

    /// What the stage's machine observed.
    func observe(_ observation: DispatchStage.Observation) {
        switch observation {
        case .handOver(let handOver):
            observe(handOver)
        case .paused:
            logger.notice("Backlog above the high watermark; pausing partitions", metadata: ["backpressure.high": "\(configuration.backpressure.highWatermark)"])
            metrics.paused(true)
        case .resumed:
            logger.notice("Backlog below the low watermark; resuming partitions", metadata: ["backpressure.low": "\(configuration.backpressure.lowWatermark)"])
            metrics.paused(false)
        case .heldOnceCaughtUp(let numbers):
            logger.info("Partitions caught up while the backlog is above the high watermark; pausing them", metadata: ["kafka.partitions": "\(numbers)"])
        }
    }

    private func observe(_ observation: PartitionOwnership.Observation) {
        metrics.handover(observation)
        switch observation {
        case .takenOver(let number, let seconds):
            logger.info("Partition taken over", metadata: ["kafka.partition": "\(number)", "handover.seconds": "\(String(format: "%.3f", seconds))"])
        case .waitedForRelease(let number, let seconds, let released):
            logger.info(released ? "Previous owner released the partition" : "Previous owner's deadline passed; taking the partition", metadata: [
                "kafka.partition": "\(number)", "handover.wait_seconds": "\(String(format: "%.3f", seconds))",
            ])
        case .lingered(let number, let seconds, let claimed):
            logger.info(claimed ? "Lingering partition claimed by its next owner" : "Lingering partition's deadline passed", metadata: [
                "kafka.partition": "\(number)", "handover.linger_seconds": "\(String(format: "%.3f", seconds))",
            ])
        case .released(let number, let seconds, let settled):
            logger.info("Partition released", metadata: [
                "kafka.partition": "\(number)", "handover.seconds": "\(String(format: "%.3f", seconds))", "handover.settled": "\(settled)",
            ])
        }
    }

    /// APNs (or no pool) answered a send after `seconds`.
    func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double) {
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

    /// Kafka refused a partition's record (its retry is the partition's).
    func writeFailed(_ produce: PartitionDispatcher.Produce, _ error: KafkaError, attempt: Int) {
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
    }
}
