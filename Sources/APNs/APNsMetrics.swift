import CoreMetrics
import Synchronization

/// The client's metrics:
/// - `apns_requests_total{status, reason}`: answers by HTTP status and reason
///   (`status="none"` for transport failures);
/// - `apns_outcomes_total{outcome}`: classified outcomes;
/// - `apns_request_duration_seconds`: latency from `send` to outcome;
/// - `apns_streams_in_flight`, `apns_requests_queued`;
/// - `apns_connections{state}`: connections by pool state;
/// - `apns_connection_attempts_total`, `apns_resends_total`, `apns_pings_total`.
final class APNsMetrics: Sendable {
    private let factory: any MetricsFactory
    private let counters = Mutex<[String: Counter]>([:])
    private let latency: Timer
    private let inFlight: Gauge
    private let queued: Gauge
    private let connections: [StateMachineState: Gauge]
    private let attempts: Counter
    private let resends: Counter
    private let pings: Counter
    private let delivered: Counter
    private let outcomes: [String: Counter]
    /// `outcomes["delivered"]`, looked up once: it is counted per push.
    private let deliveredOutcomes: Counter?

    typealias StateMachineState = APNsConnectionPool.StateMachine.ConnectionState

    init(factory: any MetricsFactory) {
        self.factory = factory
        latency = Timer(label: "apns_request_duration_seconds", dimensions: [], factory: factory)
        inFlight = Gauge(label: "apns_streams_in_flight", dimensions: [], factory: factory)
        queued = Gauge(label: "apns_requests_queued", dimensions: [], factory: factory)
        var connections: [StateMachineState: Gauge] = [:]
        for state in StateMachineState.allCases {
            connections[state] = Gauge(label: "apns_connections", dimensions: [("state", state.rawValue)], factory: factory)
        }
        self.connections = connections
        attempts = Counter(label: "apns_connection_attempts_total", dimensions: [], factory: factory)
        resends = Counter(label: "apns_resends_total", dimensions: [], factory: factory)
        pings = Counter(label: "apns_pings_total", dimensions: [], factory: factory)
        delivered = Counter(label: "apns_requests_total", dimensions: [("status", "200"), ("reason", "")], factory: factory)
        var outcomes: [String: Counter] = [:]
        for label in APNsOutcome.labels {
            outcomes[label] = Counter(label: "apns_outcomes_total", dimensions: [("outcome", label)], factory: factory)
        }
        self.outcomes = outcomes
        deliveredOutcomes = outcomes["delivered"]
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = label + "|" + dimensions.map { $0.0 + "=" + $0.1 }.joined(separator: ",")
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
    }

    func response(status: Int, reason: String) {
        if status == 200 {
            delivered.increment()
            return
        }
        counter("apns_requests_total", [("status", String(status)), ("reason", reason)]).increment()
    }

    func failure(_ reason: String) {
        counter("apns_requests_total", [("status", "none"), ("reason", reason)]).increment()
    }

    func completed(_ outcome: APNsOutcome, nanoseconds: Int64) {
        let counter: Counter? =
            switch outcome {
            case .delivered: deliveredOutcomes
            case .tokenInvalid, .permanent, .retryable, .misconfigured: outcomes[outcome.label]
            }
        (counter ?? self.counter("apns_outcomes_total", [("outcome", outcome.label)])).increment()
        latency.recordNanoseconds(nanoseconds)
    }

    func gauges(inFlight: Int, queued: Int, connections counts: [StateMachineState: Int]) {
        self.inFlight.record(inFlight)
        self.queued.record(queued)
        for (state, gauge) in connections { gauge.record(counts[state] ?? 0) }
    }

    func connectionAttempt() { attempts.increment() }
    func resent() { resends.increment() }
    func pinged() { pings.increment() }
}
