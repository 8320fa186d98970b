import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchTracing

/// What one event turns into: commands keyed by activity id and dead letters.
extension Router {
    struct Output: Sendable {
        var topic: String
        var key: [UInt8]?
        var value: [UInt8]
        /// The rule that made a command.
        var rule: String? = nil
        /// `traceparent` and `tracestate` of a traced command.
        var headers: [KafkaHeader] = []
        /// The span of a traced command's write, ended by its acknowledgement.
        var span: TracedSpan? = nil
    }

    /// The commands and dead letters one event turns into.
    func outputs(for record: KafkaRecord, now: UnixTime) -> [Output] {
        func deadLetter(_ reason: DeadLetterReason, _ message: String, rule: String?) -> Output {
            self.deadLetter(for: record, reason: reason, message: message, rule: rule, now: now)
        }
        let maxEventBytes = configuration.limits.maxEventBytes
        let domain = DomainRecord(record, now: now, maxEventBytes: maxEventBytes)
        if let rejection = domain.rejection {
            metrics.eventRouted("too_large")
            return [deadLetter(.invalidJSON, rejection.reason, rule: nil)]
        }
        var outputs: [Output] = []
        for outcome in domain.evaluate(rules.current, now: now, maxEventBytes: maxEventBytes)
        {
            switch outcome {
            case .command(let command):
                metrics.eventRouted("command")
                outputs.append(Output(
                    topic: configuration.topic(.commands), key: Array(command.activityID.rawValue.utf8), value: command.routed.serialized(),
                    rule: command.source?.rule))
            case .failure(let failure):
                metrics.eventRouted("failure")
                let reason: DeadLetterReason = failure.code == .invalidEvent ? .invalidJSON : .ruleError
                outputs.append(deadLetter(reason, failure.description, rule: failure.rule))
            case .noMatch:
                metrics.eventRouted("no_match")
            }
        }
        return outputs
    }

    /// The dead letter of an event, cut to ``DeadLetter/maxBytes``.
    func deadLetter(for record: KafkaRecord, reason: DeadLetterReason, message: String, rule: String?, now: UnixTime) -> Output {
        let letter = DeadLetter(
            reason: reason, message: message, rule: rule,
            origin: .init(
                topic: record.topic, partition: record.partition, offset: record.offset,
                key: record.key.map { String(decoding: $0, as: UTF8.self) }, valueBytes: record.value),
            deadLetteredAt: now)
        metrics.deadLettered(reason)
        observer?(letter)
        return Output(topic: configuration.topic(.deadLetters), key: record.key, value: letter.serialized())
    }
}
