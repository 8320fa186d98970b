import Kafka
import LiveDispatchCore
import LiveDispatchRules

/// Base and new rules evaluated on domain records read back from Kafka, as
/// `livedispatch rules diff` and the console's playground run them: each
/// record translated as the router translates it, both outcomes folded
/// into a ``RuleDiff``, up to a number of events.
public struct RuleDiffRun: Sendable {
    public let base: RuleSet
    public let new: RuleSet
    public let limitEvents: Int
    let maxEventBytes: Int
    let eventLimits: JSONParseLimits
    let now: UnixTime
    public private(set) var diff = RuleDiff()

    /// `now`: the time a record without a timestamp is given.
    public init(base: RuleSet, new: RuleSet, maxEventBytes: Int, limitEvents: Int, now: UnixTime) {
        self.base = base
        self.new = new
        self.maxEventBytes = maxEventBytes
        self.eventLimits = RuleSet.eventLimits(maxBytes: maxEventBytes)
        self.limitEvents = limitEvents
        self.now = now
    }

    /// The domain topics either rule set reads, sorted.
    public var topics: [String] { base.topics.union(new.topics).sorted() }

    /// Whether `limitEvents` events were read.
    public var isFull: Bool { diff.summary.eventsRead >= limitEvents }

    /// Evaluates both rule sets on one record (at the record's time) and
    /// adds the outcomes; false once the run is full, when the record is
    /// not taken.
    @discardableResult
    public mutating func take(_ record: KafkaRecord) -> Bool {
        guard !isFull else { return false }
        let domain = DomainRecord(record, now: now, maxEventBytes: maxEventBytes)
        let time = domain.record.timestamp
        let outcomes = RuleDiff.evaluate(
            base: base, new: new, record: domain.record, value: domain.value, now: time, eventLimits: eventLimits,
            rejection: domain.rejection)
        diff.add(domain.record, base: outcomes.base, new: outcomes.new, now: time)
        return true
    }
}
