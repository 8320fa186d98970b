import Kafka
import LiveDispatchCore
import LiveDispatchTracing
import Tracing

extension Router {
    /// Starts the span of one event's rule evaluation, under the trace of
    /// the record's `traceparent` header (a new trace when it has none);
    /// nil when tracing is off.
    func startEvaluation(of record: KafkaRecord) -> TracedSpan? {
        guard let tracing else { return nil }
        let parent = WorkerTracing.context(of: record.headers)
        let span = tracing.tracer.startSpan("evaluate rules", context: .with(parent), ofKind: .consumer)
        guard span.isRecording else { return span }
        span.attributes["messaging.system"] = "kafka"
        span.attributes["messaging.destination.name"] = record.topic
        span.attributes["messaging.destination.partition.id"] = String(record.partition)
        span.attributes["messaging.kafka.offset"] = record.offset
        return span
    }

    /// The outputs of an evaluation with a span per command written, whose
    /// context goes into the command's headers (a span that is not sampled
    /// still carries the trace on); ends the evaluation's span.
    func traced(_ outputs: [Output], under evaluation: TracedSpan?) -> [Output] {
        guard let tracing, let evaluation else { return outputs }
        defer { evaluation.end() }
        var traced = outputs
        var rules: [String] = []
        for index in traced.indices where traced[index].topic == commandsTopic {
            let rule = traced[index].rule ?? ""
            rules.append(rule)
            let write = tracing.tracer.startSpan("write command", context: evaluation.context, ofKind: .producer)
            if write.isRecording {
                write.attributes["livedispatch.rule"] = rule
                write.attributes["activity.id"] = traced[index].key.map { String(decoding: $0, as: UTF8.self) }
                write.attributes["messaging.destination.name"] = commandsTopic
            }
            traced[index].headers = WorkerTracing.headers(write.traceContext)
            traced[index].span = write
        }
        if evaluation.isRecording {
            evaluation.attributes["livedispatch.rules"] = rules
            evaluation.attributes["livedispatch.outputs"] = traced.count
        }
        return traced
    }
}
