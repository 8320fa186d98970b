import Kafka
import LiveDispatchCore
import LiveDispatchRules

/// A domain record as the rules see it: the one translation of a Kafka
/// record that the router and `rules diff` share, so both evaluate an event
/// alike.
public struct DomainRecord: Sendable {
    /// The topic, partition, offset, key (as UTF-8 text), headers and time
    /// (the record's, or `now` when it has none).
    public var record: EventRecord
    /// The value's bytes; a tombstone's are empty (not JSON).
    public var value: [UInt8]
    /// Set when the value is over `limits.max_event_bytes`: the event is
    /// not evaluated and fails with this.
    public var rejection: RuleFailure?

    public init(_ record: KafkaRecord, now: UnixTime, maxEventBytes: Int) {
        let timestamp = record.timestampMilliseconds.map { UnixTime(seconds: Double($0) / 1000) } ?? now
        var headers: [String: String] = [:]
        for header in record.headers { headers[header.key] = header.value.map { String(decoding: $0, as: UTF8.self) } ?? "" }
        self.record = EventRecord(
            topic: record.topic, partition: record.partition, offset: record.offset,
            key: record.key.map { String(decoding: $0, as: UTF8.self) }, headers: headers, timestamp: timestamp)
        value = record.value ?? []
        rejection = value.count > maxEventBytes
            ? RuleFailure(code: .invalidEvent, rule: nil, reason: "event is \(value.count) bytes, over limits.max_event_bytes (\(maxEventBytes))")
            : nil
    }

    /// The rules' outcomes for this event, as the router takes them.
    public func evaluate(_ rules: RuleSet, now: UnixTime, maxEventBytes: Int) -> [RuleOutcome] {
        if let rejection { return [.failure(rejection)] }
        return rules.evaluate(record, value: value, now: now, eventLimits: RuleSet.eventLimits(maxBytes: maxEventBytes))
    }
}
