import Kafka
import LiveDispatchCore

/// Publishes what became of pushes, audience starts and tokens
/// (``Outcome``): one record on the `outcomes` topic (key: the activity
/// id) and, when webhooks are configured, the same JSON to the webhook.
/// Nothing here waits: a record Kafka refuses is counted, not retried by
/// the partition, so outcomes never hold back a push or a commit.
struct OutcomePublisher: Sendable {
    let producer: any ProducerPort
    /// Nil when the topic does not exist: outcomes go to the webhook only.
    let topic: String?
    let metrics: WorkerMetrics
    /// Hands an outcome's id and body to the webhook, when there is one.
    var webhook: (@Sendable (_ id: String, _ body: [UInt8]) -> Void)?

    /// `now` is read only for an observation that is an outcome (most,
    /// one per command, are not).
    func publish(_ observation: PartitionDispatcher.Observation, now: @autoclosure () -> UnixTime) {
        guard let outcome = Outcome.of(observation, now: now()) else { return }
        let value = outcome.json.serialized()
        let kind = outcome.kind
        let metrics = metrics
        webhook?(outcome.id, value)
        guard let topic else { return }
        do {
            try producer.enqueue(topic: topic, key: Array(outcome.activityID.rawValue.utf8), value: value).whenComplete { result in
                switch result {
                case .success: metrics.outcomePublished(kind)
                case .failure: metrics.outcomeDropped("kafka-refused")
                }
            }
        } catch {
            metrics.outcomeDropped("kafka-queue")
        }
    }
}
