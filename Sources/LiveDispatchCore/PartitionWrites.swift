/// The records a partition's machine writes and what each one's
/// acknowledgement finishes: every produce carries a ticket, and Kafka's
/// acknowledgement of that ticket hands back its ``PartitionDispatcher/AckEffect``.
struct PartitionWrites: Sendable {
    typealias Action = PartitionDispatcher.Action
    typealias AckEffect = PartitionDispatcher.AckEffect

    /// The partition number of the co-partitioned topics written.
    let partition: Int32
    private var effects: [UInt64: AckEffect] = [:]
    private var nextTicket: UInt64 = 1

    init(partition: Int32) {
        self.partition = partition
    }

    /// Whether every write was acknowledged.
    var isEmpty: Bool { effects.isEmpty }

    /// A record of this partition of a co-partitioned topic; nil `value`
    /// writes a tombstone.
    mutating func produce(_ topic: InternalTopic, key: String, value: [UInt8]?, then effect: AckEffect, trace: TraceContext? = nil) -> Action {
        .produce(PartitionDispatcher.Produce(topic: topic, key: key, value: value, partition: partition, ticket: ticket(effect), trace: trace))
    }

    /// A record the producer places by its key (an audience start goes to
    /// its audience's partition).
    mutating func produceByKey(_ topic: InternalTopic, key: String, value: [UInt8], then effect: AckEffect) -> Action {
        .produce(PartitionDispatcher.Produce(topic: topic, key: key, value: value, partition: nil, ticket: ticket(effect)))
    }

    /// A dead letter, and its observation.
    mutating func deadLetter(_ letter: DeadLetter, key: String, then effect: AckEffect) -> [Action] {
        [produceByKey(.deadLetters, key: key, value: letter.serialized(), then: effect), .observe(.deadLettered(letter))]
    }

    /// What the write with `ticket` finishes, once; nil for a ticket not
    /// issued or already acknowledged.
    mutating func acknowledged(_ ticket: UInt64) -> AckEffect? {
        effects.removeValue(forKey: ticket)
    }

    private mutating func ticket(_ effect: AckEffect) -> UInt64 {
        let ticket = nextTicket
        nextTicket += 1
        effects[ticket] = effect
        return ticket
    }
}
