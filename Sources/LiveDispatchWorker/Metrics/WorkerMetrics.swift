import APNs
import CoreMetrics
import LiveDispatchCore
import Synchronization

/// The worker's own metrics (APNs client metrics come from the pool):
/// records consumed, commands routed, pushes and their outcomes, coalescing,
/// dead letters by reason, back-pressure and assignment.
public struct WorkerMetrics: Sendable {
    let factory: any MetricsFactory
    /// What is counted per push, per consumed record and per routed event,
    /// made once: a handle made each time costs the factory's lookup by name
    /// and labels, under its lock.
    private let pushes: CounterCache
    private let pushDuration: Timer
    private let consumed: CounterCache
    private let routed: CounterCache
    /// Commands sent without a type check, counted per command.
    private let unchecked: CounterCache
    /// CPU seconds counted so far: a scrape adds what was used since.
    private let reportedCPU = ReportedTotal()

    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        pushes = CounterCache(label: "livedispatch_pushes_total", dimension: "outcome", factory: factory, making: APNsOutcome.labels)
        pushDuration = Timer(label: "livedispatch_push_duration_seconds", dimensions: [], factory: factory)
        consumed = CounterCache(label: "livedispatch_records_consumed_total", dimension: "topic", factory: factory)
        routed = CounterCache(label: "livedispatch_router_events_total", dimension: "outcome", factory: factory)
        unchecked = CounterCache(
            label: "livedispatch_commands_unchecked_total", dimension: "why", factory: factory,
            making: [TypeChecking.untyped, .undeclared("")].compactMap(\.uncheckedLabel))
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Counter {
        Counter(label: label, dimensions: dimensions, factory: factory)
    }

    /// Creates, at zero, the series that alerts and dashboards read before
    /// their first event: Prometheus cannot tell a series that does not exist
    /// yet from a quiet one, so `rate(...) == 0` would never hold without them.
    func registerQuietSeries() {
        counter("livedispatch_pushes_total", [("outcome", "delivered")]).increment(by: 0)
        counter("livedispatch_router_events_total", [("outcome", "command")]).increment(by: 0)
        counter("livedispatch_tokens_removed_total").increment(by: 0)
        counter("livedispatch_commands_duplicate_total").increment(by: 0)
        for kind in ["push", "audience_start", "token_removed"] { counter("livedispatch_outcomes_total", [("kind", kind)]).increment(by: 0) }
        counter("livedispatch_priority_downgrades_total").increment(by: 0)
        for reason in ActivityLifecycle.ExpiryReason.allCases {
            counter("livedispatch_activities_expired_total", [("reason", reason.rawValue)]).increment(by: 0)
        }
        paused(false)
        routerPaused(false)
        partitions(owned: 0, restoring: 0, lingering: 0, releasing: 0)
    }

    func recordConsumed(_ topic: String) {
        consumed[topic].increment()
    }

    func eventRouted(_ outcome: String) {
        routed[outcome].increment()
    }

    /// A push APNs answered, by its ``SendResult/label``.
    func pushSent(_ label: String, seconds: Double) {
        pushes[label].increment()
        pushDuration.recordNanoseconds(Int64(Int(saturating: seconds * 1e9)))
    }

    func observe(_ observation: PartitionDispatcher.Observation) {
        switch observation {
        case .pushCompleted(_, let commands, _, _, _):
            counter("livedispatch_activity_pushes_completed_total").increment()
            counter("livedispatch_commands_dispatched_total").increment(by: commands)
            Recorder(label: "livedispatch_commands_per_push", dimensions: [], aggregate: true, factory: factory).record(commands)
        case .deadLettered(let letter):
            counter("livedispatch_dead_letters_total", [("reason", letter.reason.rawValue)]).increment()
        case .tokenRemoved:
            counter("livedispatch_tokens_removed_total").increment()
        case .activityExpired(_, let reason):
            counter("livedispatch_activities_expired_total", [("reason", reason)]).increment()
        case .duplicateCommand:
            counter("livedispatch_commands_duplicate_total").increment()
        case .uncheckedCommand(_, let checking):
            if let label = checking.uncheckedLabel { unchecked[label].increment() }
        case .priorityDowngraded:
            counter("livedispatch_priority_downgrades_total").increment()
        case .audienceStarted(_, _, let delivered, let alreadyStarted):
            counter("livedispatch_audience_starts_total", [("outcome", "delivered")]).increment(by: delivered.count)
            counter("livedispatch_audience_starts_total", [("outcome", "already-started")]).increment(by: alreadyStarted)
        case .channelCreated:
            counter("livedispatch_broadcast_channels_total", [("operation", "created")]).increment()
        case .channelDeleted:
            counter("livedispatch_broadcast_channels_total", [("operation", "deleted")]).increment()
        case .pushTraced:
            break
        }
    }

    func deadLettered(_ reason: DeadLetterReason) {
        counter("livedispatch_dead_letters_total", [("reason", reason.rawValue)]).increment()
    }

    /// A record Kafka refused for good and that was given up.
    /// An outcome Kafka acknowledged on the `outcomes` topic.
    func outcomePublished(_ kind: String) {
        counter("livedispatch_outcomes_total", [("kind", kind)]).increment()
    }

    /// An outcome that did not reach the `outcomes` topic.
    func outcomeDropped(_ reason: String) {
        counter("livedispatch_outcomes_dropped_total", [("reason", reason)]).increment()
    }

    func writeDropped(topic: String) {
        counter("livedispatch_kafka_writes_dropped_total", [("topic", topic)]).increment()
    }

    func paused(_ isPaused: Bool) {
        Gauge(label: "livedispatch_consumer_paused", dimensions: [], factory: factory).record(isPaused ? 1 : 0)
    }

    /// The router's consumer paused by back-pressure (its own records in
    /// progress and the dispatcher's backlog).
    func routerPaused(_ isPaused: Bool) {
        Gauge(label: "livedispatch_router_paused", dimensions: [], factory: factory).record(isPaused ? 1 : 0)
    }

    func partitions(owned: Int, restoring: Int, lingering: Int, releasing: Int) {
        Gauge(label: "livedispatch_assigned_partitions", dimensions: [], factory: factory).record(owned)
        Gauge(label: "livedispatch_partitions_restoring", dimensions: [], factory: factory).record(restoring)
        Gauge(label: "livedispatch_partitions_lingering", dimensions: [], factory: factory).record(lingering)
        Gauge(label: "livedispatch_partitions_releasing", dimensions: [], factory: factory).record(releasing)
    }

    /// A partition moved in (assignment → restored: the new owner's part of
    /// the time a moved partition has no owner pushing it, of which the
    /// wait for a lingering previous owner is a part) or out (revocation →
    /// end of the linger, during which it is still pushed; release).
    func handover(_ observation: PartitionOwnership.Observation) {
        switch observation {
        case .takenOver(_, let seconds):
            Timer(label: "livedispatch_partition_takeover_seconds", dimensions: [], factory: factory)
                .recordNanoseconds(Int64(Int(saturating: seconds * 1e9)))
        case .released(_, let seconds, let settled):
            Timer(label: "livedispatch_partition_release_seconds", dimensions: [("settled", settled ? "true" : "false")], factory: factory)
                .recordNanoseconds(Int64(Int(saturating: seconds * 1e9)))
        case .lingered(_, let seconds, let claimed):
            Timer(label: "livedispatch_partition_linger_seconds", dimensions: [("claimed", claimed ? "true" : "false")], factory: factory)
                .recordNanoseconds(Int64(Int(saturating: seconds * 1e9)))
        case .waitedForRelease(_, let seconds, let released):
            Timer(label: "livedispatch_partition_release_wait_seconds", dimensions: [("released", released ? "true" : "false")], factory: factory)
                .recordNanoseconds(Int64(Int(saturating: seconds * 1e9)))
        }
    }

    func backlog(_ count: Int) {
        Gauge(label: "livedispatch_records_in_progress", dimensions: [], factory: factory).record(count)
    }

    /// The process's CPU time, memory and descriptors under the names
    /// Prometheus's client libraries give them (`process_cpu_seconds_total`
    /// and the rest), brought up to date at a scrape.
    func process(_ statistics: ProcessStatistics) {
        let added = reportedCPU.advance(to: statistics.cpuSeconds)
        FloatingPointCounter(label: "process_cpu_seconds_total", dimensions: [], factory: factory).increment(by: added)
        Gauge(label: "process_resident_memory_bytes", dimensions: [], factory: factory).record(statistics.residentBytes)
        Gauge(label: "process_virtual_memory_bytes", dimensions: [], factory: factory).record(statistics.virtualBytes)
        Gauge(label: "process_start_time_seconds", dimensions: [], factory: factory).record(statistics.startTime)
        if let open = statistics.openFileDescriptors {
            Gauge(label: "process_open_fds", dimensions: [], factory: factory).record(open)
        }
        if let limit = statistics.maxFileDescriptors {
            Gauge(label: "process_max_fds", dimensions: [], factory: factory).record(limit)
        }
    }

    func sendsInFlight(_ count: Int, limit: Int) {
        Gauge(label: "livedispatch_sends_in_flight", dimensions: [], factory: factory).record(count)
        Gauge(label: "livedispatch_sends_in_flight_limit", dimensions: [], factory: factory).record(limit)
    }
}

/// Counters of one metric by the value of one label, made through the
/// factory once and kept: those of `making` at once (read without a lock),
/// others on first use. The label's values are few and come from the
/// configuration or the code (topics, outcomes), never from a record.
final class CounterCache: Sendable {
    private let label: String
    private let dimension: String
    private let factory: any MetricsFactory
    private let made: [String: Counter]
    private let counters = Mutex<[String: Counter]>([:])

    init(label: String, dimension: String, factory: any MetricsFactory, making values: [String] = []) {
        self.label = label
        self.dimension = dimension
        self.factory = factory
        made = Dictionary(values.map { ($0, Counter(label: label, dimensions: [(dimension, $0)], factory: factory)) }) { first, _ in first }
    }

    subscript(value: String) -> Counter {
        if let counter = made[value] ?? counters.withLock({ $0[value] }) { return counter }
        let counter = Counter(label: label, dimensions: [(dimension, value)], factory: factory)
        counters.withLock { $0[value] = counter }
        return counter
    }
}

/// A total reported as a counter from readings of a running sum: each
/// reading adds what grew since the last (never a negative step).
final class ReportedTotal: Sendable {
    private let reported = Mutex(0.0)

    func advance(to reading: Double) -> Double {
        reported.withLock { reported in
            guard reading.isFinite, reading > reported else { return 0 }
            defer { reported = reading }
            return reading - reported
        }
    }
}
