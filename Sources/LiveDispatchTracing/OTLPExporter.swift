import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Sends finished spans to an OTLP/HTTP endpoint in batches, from a
/// bounded queue, on its own task (a ServiceLifecycle service).
///
/// ``record(_:)`` never waits: when the queue is full the span is dropped
/// and counted (`livedispatch_trace_spans_dropped_total{reason="queue_full"}`),
/// so tracing never slows a push. A batch the endpoint refuses or does not
/// answer is dropped and counted too (`reason="export_failed"`); spans are
/// not worth holding pushes' memory for.
public final class OTLPExporter: SpanSink, Service, Sendable {
    /// How the queue and the batches are sized.
    public struct Limits: Sendable, Hashable {
        /// Spans waiting at most; more are dropped.
        public var queueSize: Int
        /// Spans per request at most.
        public var batchSize: Int
        /// Longest a span waits for a batch to fill.
        public var interval: Duration

        public init(queueSize: Int = 8_192, batchSize: Int = 512, interval: Duration = .seconds(1)) {
            self.queueSize = max(1, queueSize)
            self.batchSize = max(1, batchSize)
            self.interval = interval
        }
    }

    private struct Queue: Sendable {
        var spans: [SpanRecord] = []
        /// A wake-up is on its way to the export task.
        var signalled = false
    }

    public let client: OTLPHTTPClient
    let resource: [SpanRecord.Attribute]
    let limits: Limits
    let logger: Logger
    private let queue = Mutex(Queue())
    private let wake: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation
    private let dropped: Counter
    private let failed: Counter
    private let exported: Counter
    /// When the last failure was logged: one line a minute at most.
    private let lastFailureLogged = Mutex<ContinuousClock.Instant?>(nil)

    /// - Parameter resource: the attributes of the process (`service.name`, …).
    public init(
        client: OTLPHTTPClient, resource: [SpanRecord.Attribute], limits: Limits = .init(), logger: Logger,
        metrics: any MetricsFactory = MetricsSystem.factory
    ) {
        self.client = client
        self.resource = resource
        self.limits = limits
        self.logger = logger
        (wake, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        dropped = Counter(label: "livedispatch_trace_spans_dropped_total", dimensions: [("reason", "queue_full")], factory: metrics)
        failed = Counter(label: "livedispatch_trace_spans_dropped_total", dimensions: [("reason", "export_failed")], factory: metrics)
        exported = Counter(label: "livedispatch_trace_spans_exported_total", dimensions: [], factory: metrics)
    }

    public func record(_ span: SpanRecord) {
        let (taken, signal) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.spans.count < limits.queueSize else { return (false, false) }
            queue.spans.append(span)
            let signal = queue.spans.count >= limits.batchSize && !queue.signalled
            if signal { queue.signalled = true }
            return (true, signal)
        }
        if !taken { dropped.increment() }
        if signal { wakeUp.yield() }
    }

    public func flush() {
        queue.withLock { $0.signalled = true }
        wakeUp.yield()
    }

    /// Spans waiting to be sent.
    public var queued: Int { queue.withLock { $0.spans.count } }

    /// Exports a batch whenever one is full or `interval` passed; on
    /// graceful shutdown it sends what is queued, then returns.
    public func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [limits, wakeUp] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: limits.interval)
                        wakeUp.yield()
                    }
                }
                for await _ in wake {
                    await exportQueued()
                }
                group.cancelAll()
            }
            await exportQueued()
        } onGracefulShutdown: { [wakeUp] in
            wakeUp.finish()
        }
    }

    /// Sends every queued span, a batch at a time.
    func exportQueued() async {
        while true {
            let batch = queue.withLock { queue -> [SpanRecord] in
                queue.signalled = false
                let count = min(limits.batchSize, queue.spans.count)
                defer { queue.spans.removeFirst(count) }
                return Array(queue.spans.prefix(count))
            }
            guard !batch.isEmpty else { return }
            await export(batch)
        }
    }

    /// Sends one batch; true when the endpoint took it.
    @discardableResult
    func export(_ batch: [SpanRecord]) async -> Bool {
        let body = OTLPTraceEncoding.exportRequest(batch, resource: resource)
        let problem: String
        do {
            let status = try await client.post(body)
            if (200..<300).contains(status) {
                exported.increment(by: Int64(batch.count))
                return true
            }
            problem = "HTTP \(status)"
        } catch {
            problem = "\(error)"
        }
        failed.increment(by: Int64(batch.count))
        let now = ContinuousClock.now
        let shouldLog = lastFailureLogged.withLock { last in
            guard last.map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            last = now
            return true
        }
        if shouldLog {
            logger.warning("Spans not exported; dropped (logged once a minute)", metadata: [
                "otlp.endpoint": "\(client.endpoint)", "otlp.error": "\(problem)", "otlp.spans": "\(batch.count)",
            ])
        }
        return false
    }
}
