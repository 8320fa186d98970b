import CoreMetrics
import LiveDispatchCore

/// The webhook sender's series: outcomes delivered, outcomes dropped by
/// reason, retries, and the outcomes held.
struct WebhookMetrics: Sendable {
    private let delivered: Counter
    private let retries: Counter
    private let drops: [WebhookQueue.DropReason: Counter]
    private let queue: Gauge

    init(factory: any MetricsFactory) {
        delivered = Counter(label: "livedispatch_webhooks_total", dimensions: [("result", "delivered")], factory: factory)
        retries = Counter(label: "livedispatch_webhook_retries_total", dimensions: [], factory: factory)
        drops = Dictionary(uniqueKeysWithValues: WebhookQueue.DropReason.allCases.map {
            ($0, Counter(label: "livedispatch_webhook_drops_total", dimensions: [("reason", $0.rawValue)], factory: factory))
        })
        queue = Gauge(label: "livedispatch_webhook_queue", dimensions: [], factory: factory)
        // At zero from the start, so that `rate(...)` has a series to read.
        delivered.increment(by: 0)
        retries.increment(by: 0)
        for counter in drops.values { counter.increment(by: 0) }
        queue.record(0)
    }

    func recordDelivered() { delivered.increment() }
    func recordRetry() { retries.increment() }
    func recordDropped(_ reason: WebhookQueue.DropReason) { drops[reason]?.increment() }
    func recordQueued(_ count: Int) { queue.record(count) }
}
