import Kafka
import LiveDispatchCore
import LiveDispatchRules

/// How a consumed record becomes an input of its partition's machine: the
/// topic it came from, the activity types its runner checks commands
/// against (the rules in force, followed as they are reloaded), a sampled
/// trace from its headers, and its date (the record's, else now).
struct RecordIntake: Sendable {
    let configuration: WorkerConfiguration
    /// Where the activity types come from; nil checks no types.
    let types: RuleSetStore?
    let tracing: WorkerTracing?
    let metrics: WorkerMetrics

    /// The internal topic `record` came from, counted as consumed.
    func topic(of record: KafkaRecord) -> InternalTopic {
        let topic: InternalTopic = switch record.topic {
        case configuration.topic(.commands): .commands
        case configuration.topic(.starts): .starts
        default: .tokens
        }
        metrics.recordConsumed(topic.rawValue)
        return topic
    }

    /// Hands `record` of `topic` to `runner`'s machine.
    func feed(_ record: KafkaRecord, of topic: InternalTopic, to runner: PartitionRunner) {
        var newTypes: ActivityTypes?
        if topic == .commands, let types { newTypes = runner.typesToFollow(types) }
        // Only a sampled trace goes into the machine: nothing of another would be recorded.
        let trace = tracing != nil && topic == .commands ? WorkerTracing.context(of: record.headers).flatMap { $0.isSampled ? $0 : nil } : nil
        runner.apply { machine, now in
            if let newTypes { machine.useTypes(newTypes) }
            let input = PartitionDispatcher.Record(
                offset: record.offset, key: record.key, value: record.value,
                timestamp: record.timestampMilliseconds.map { UnixTime(seconds: Double($0) / 1000) } ?? now, trace: trace)
            return switch topic {
            case .commands: machine.command(input, now: now)
            case .starts: machine.audienceStartRecord(input, now: now)
            case .tokens, .state, .tokenStore, .deadLetters, .channels, .outcomes: machine.tokenRecord(input, now: now)
            }
        }
    }
}
