import Kafka
import LiveDispatchCore
import LiveDispatchTracing
import Logging
import Metrics
import Tracing

/// The worker's tracing (`tracing:`): the tracer, the OTLP exporter the
/// worker runs as a service, and the spans of the stages built around the
/// machines, which carry trace contexts as plain data
/// (``TraceContext``, ``CommandTrace``, ``PushTrace``).
public struct WorkerTracing: Sendable {
    public let tracer: LiveDispatchTracer
    public let exporter: OTLPExporter
    /// Decides by a token's hash whether its APNs requests get spans.
    let tokens: TraceSampler

    /// The worker's tracing, or nil when `tracing.enabled` is false.
    public init?(configuration: WorkerConfiguration, logger: Logger, metrics: any MetricsFactory = MetricsSystem.factory) {
        let settings = configuration.tracing
        guard let sampler = configuration.traceSampler, let endpoint = OTLPHTTPClient.Endpoint(url: settings.endpoint) else { return nil }
        var resource: [SpanRecord.Attribute] = [
            .init("service.name", .string(settings.serviceName)),
            .init("telemetry.sdk.name", .string("livedispatch")),
            .init("telemetry.sdk.language", .string("swift")),
        ]
        if !configuration.kafka.instanceID.isEmpty { resource.append(.init("service.instance.id", .string(configuration.kafka.instanceID))) }
        exporter = OTLPExporter(
            client: OTLPHTTPClient(endpoint: endpoint), resource: resource,
            limits: .init(queueSize: settings.queueSize, interval: .seconds(settings.exportInterval)), logger: logger, metrics: metrics)
        tracer = LiveDispatchTracer(sampler: sampler, sink: exporter)
        tokens = TraceSampler(ratio: settings.apnsTokenRatio, followsParent: false)
    }

    // MARK: Headers

    /// The trace context of a record's `traceparent` and `tracestate`
    /// headers; nil when it has none or they are malformed.
    public static func context(of headers: [KafkaHeader]) -> TraceContext? {
        guard let parent = headers.first(where: { $0.key == TraceContext.traceparentHeader })?.value else { return nil }
        let state = headers.first { $0.key == TraceContext.tracestateHeader }?.value
        return TraceContext(traceparent: parent, tracestate: state)
    }

    /// The headers that carry `context` into a record.
    public static func headers(_ context: TraceContext?) -> [KafkaHeader] {
        context?.headers.map { KafkaHeader(key: $0.name, value: Array($0.value.utf8)) } ?? []
    }

    // MARK: Dispatcher spans

    /// Records the spans of a completed push: each traced command's time
    /// in the coalescing window, and the push from its flush to now, with a
    /// link to every traced command it merged.
    func recordPush(_ trace: PushTrace, completedAt now: UnixTime) {
        guard let context = trace.context, context.isSampled, let newest = trace.traces.last else { return }
        let flushed = EpochInstant(trace.flushedAt)
        for command in trace.traces where command.context.isSampled {
            let held = tracer.startSpan(
                "coalesce", parent: command.context, kind: .internal,
                at: EpochInstant(command.heldSince).nanosecondsSinceEpoch)
            held.attributes["activity.id"] = trace.activityID.rawValue
            held.attributes["activity.version"] = Int64(clamping: trace.version)
            held.attributes["messaging.kafka.offset"] = command.offset
            held.end(at: flushed)
        }
        let push = tracer.startSpan(
            "push \(trace.event.rawValue)", parent: newest.context, spanID: context.spanID, kind: .internal,
            at: flushed.nanosecondsSinceEpoch)
        push.attributes["activity.id"] = trace.activityID.rawValue
        push.attributes["activity.version"] = Int64(clamping: trace.version)
        push.attributes["activity.event"] = trace.event.rawValue
        push.attributes["push.tokens"] = trace.tokens
        push.attributes["push.commands"] = trace.commands
        for command in trace.traces {
            push.addLink(command.context, attributes: [.init("messaging.kafka.offset", .int(command.offset))])
        }
        push.end(at: EpochInstant(now))
    }

    /// Records the write of a traced push's snapshot to `state`, under the
    /// push's span, from its enqueueing to Kafka's acknowledgement (which
    /// lets the commands the push merged be committed).
    func recordWrite(_ produce: PartitionDispatcher.Produce, _ report: KafkaDeliveryReport, started: UnixTime, ended: UnixTime) {
        guard let parent = produce.trace, parent.isSampled else { return }
        let span = tracer.startSpan("write snapshot", parent: parent, kind: .producer, at: EpochInstant(started).nanosecondsSinceEpoch)
        span.attributes["activity.id"] = produce.key
        span.attributes["messaging.destination.name"] = report.topic
        span.attributes["messaging.destination.partition.id"] = "\(report.partition)"
        span.attributes["messaging.kafka.offset"] = report.offset
        span.end(at: EpochInstant(ended))
    }

    /// Whether the token's APNs requests get spans (the same tokens in
    /// every push, so one device can be followed).
    func isTraced(_ token: DeviceToken) -> Bool {
        tokens.samples(SplitMix64.mix(FNV1a.hash(token.hex)))
    }

    /// Records one APNs request of a traced push, under the push's span.
    func recordRequest(_ send: PartitionDispatcher.Send, _ result: SendResult, started: UnixTime, ended: UnixTime) {
        guard let parent = send.push.traceContext, parent.isSampled, isTraced(send.token) else { return }
        let span = tracer.startSpan(
            "APNs \(send.push.event.rawValue)", parent: parent, kind: .client,
            at: EpochInstant(started).nanosecondsSinceEpoch)
        span.attributes["activity.id"] = send.activityID.rawValue
        span.attributes["activity.version"] = Int64(clamping: send.push.version)
        span.attributes["apns.token"] = send.channel == nil ? String(send.token.hex.prefix(8)) : nil
        span.attributes["apns.channel_id"] = send.channel?.id
        span.attributes["apns.outcome"] = result.label ?? "unrouted"
        span.attributes["apns.id"] = result.apnsID
        span.attributes["apns.attempt"] = send.attempt
        span.attributes["http.response.status_code"] = result.status.map(Int64.init)
        switch result.outcome {
        case .delivered:
            span.setStatus(SpanStatus(code: .ok))
        case .tokenInvalid(let reason), .permanent(let reason), .retryable(let reason, _):
            span.attributes["apns.reason"] = reason
            span.setStatus(SpanStatus(code: .error, message: reason))
        }
        span.end(at: EpochInstant(ended))
    }
}
