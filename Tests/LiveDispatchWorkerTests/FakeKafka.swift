import Foundation
import Kafka
import Logging
import Synchronization

/// An in-memory Kafka for driving stage shells in process: topics as
/// arrays of records, committed offsets per group, consumers whose
/// assignments the test gives and revokes (the revocation handler runs on
/// a thread of its own, as on librdkafka's poll thread), and records
/// handed to consumers when the test pumps.
final class FakeKafka: KafkaClientFactory {
    struct Cluster {
        var logs: [TopicPartition: [KafkaRecord]] = [:]
        /// Committed next-offsets per group.
        var committed: [String: [TopicPartition: Int64]] = [:]
    }

    let partitionCount: Int
    let cluster = Mutex(Cluster())
    let consumers = Mutex<[FakeConsumer]>([])

    init(partitionCount: Int) {
        self.partitionCount = partitionCount
    }

    func groupConsumer(
        _ configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger, onRevocation: KafkaConsumer.RevocationHandler?
    ) throws(KafkaError) -> any ConsumerPort {
        let consumer = FakeConsumer(kafka: self, group: configuration.groupID, subscribed: true, onRevocation: onRevocation)
        consumers.withLock { $0.append(consumer) }
        return consumer
    }

    func assigningConsumer(_ configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) -> any ConsumerPort {
        let consumer = FakeConsumer(kafka: self, group: configuration.groupID, subscribed: false, onRevocation: nil)
        consumers.withLock { $0.append(consumer) }
        return consumer
    }

    func partitionReader(_ configuration: KafkaClientConfiguration, logger: Logger) -> any PartitionReaderPort {
        FakeReader(kafka: self)
    }

    func partitionCounts(_ configuration: KafkaClientConfiguration, logger: Logger, timeout: Duration) async throws(KafkaError) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: cluster.withLock { Set($0.logs.keys.map(\.topic)) }.map { ($0, partitionCount) })
    }

    /// Appends a record; returns its offset.
    @discardableResult
    func append(topic: String, partition: Int32, key: [UInt8]?, value: [UInt8]?) -> Int64 {
        cluster.withLock { cluster in
            let partition = TopicPartition(topic: topic, partition: partition)
            let offset = Int64(cluster.logs[partition, default: []].count)
            cluster.logs[partition, default: []].append(KafkaRecord(topic: topic, partition: partition.partition, offset: offset, key: key, value: value))
            return offset
        }
    }

    func records(_ topic: String, _ partition: Int32) -> [KafkaRecord] {
        cluster.withLock { $0.logs[TopicPartition(topic: topic, partition: partition)] ?? [] }
    }

    func committed(_ group: String, _ partition: TopicPartition) -> Int64? {
        cluster.withLock { $0.committed[group]?[partition] }
    }

    /// Hands every consumer the records of its assigned, unpaused partitions it has not had yet.
    func pump() {
        for consumer in consumers.withLock({ $0 }) { consumer.pump() }
    }
}

final class FakeConsumer: ConsumerPort {
    struct State {
        var assigned: Set<TopicPartition> = []
        var paused: Set<TopicPartition> = []
        var positions: [TopicPartition: Int64] = [:]
        var stored: [TopicPartition: Int64] = [:]
        var closed = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    let kafka: FakeKafka
    let group: String
    let subscribed: Bool
    let onRevocation: KafkaConsumer.RevocationHandler?
    let events: KafkaConsumerEvents
    private let continuation: KafkaConsumerEvents.Continuation
    let state = Mutex(State())
    /// Orders pumps, assignments and revocations: one at a time, as on a poll thread.
    private let poll = Mutex<Void>(())

    init(kafka: FakeKafka, group: String, subscribed: Bool, onRevocation: KafkaConsumer.RevocationHandler?) {
        self.kafka = kafka
        self.group = group
        self.subscribed = subscribed
        self.onRevocation = onRevocation
        (events, continuation) = KafkaConsumerEvents.makeStream()
    }

    func run() async throws { await untilClosed() }
    func runUntilClosed() async throws { await untilClosed() }

    private func untilClosed() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state in
                if !state.closed { state.waiters.append(waiter) }
                return state.closed
            }
            if closed { waiter.resume() }
        }
    }

    /// Revokes what the group assigned (as leaving does), ends the events.
    func close() {
        let assigned = state.withLock { $0.closed ? [] : Array($0.assigned) }
        if subscribed, !assigned.isEmpty { revoke(assigned) }
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        continuation.finish()
        for waiter in waiters { waiter.resume() }
    }

    var assignment: Set<TopicPartition> { state.withLock { $0.assigned } }

    func pause(_ partitions: [TopicPartition]) throws(KafkaError) {
        state.withLock { $0.paused.formUnion(Set(partitions).intersection($0.assigned)) }
    }

    func resume(_ partitions: [TopicPartition]) throws(KafkaError) {
        state.withLock { $0.paused.subtract(partitions) }
    }

    func assign(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64]) throws(KafkaError) {
        guard !subscribed else { throw KafkaError(code: .assignment, message: "subscribed") }
        place(partitions, offsets: offsets)
    }

    func unassign(_ partitions: [TopicPartition]) throws(KafkaError) {
        guard !subscribed else { throw KafkaError(code: .assignment, message: "subscribed") }
        state.withLock { state in
            for partition in partitions {
                state.assigned.remove(partition)
                state.paused.remove(partition)
                state.positions[partition] = nil
            }
        }
    }

    private func place(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64]) {
        let committed = kafka.cluster.withLock { $0.committed[group] ?? [:] }
        state.withLock { state in
            for partition in partitions {
                state.assigned.insert(partition)
                state.positions[partition] = offsets[partition] ?? committed[partition] ?? 0
            }
        }
    }

    func storeOffsets(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        state.withLock { state in for offset in offsets { state.stored[offset.topicPartition] = offset.offset } }
    }

    func commitBlocking() throws(KafkaError) {
        let stored = state.withLock { state in
            defer { state.stored = [:] }
            return state.stored
        }
        kafka.cluster.withLock { $0.committed[group, default: [:]].merge(stored) { _, new in new } }
    }

    func commitBlocking(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        kafka.cluster.withLock { cluster in
            for offset in offsets { cluster.committed[group, default: [:]][offset.topicPartition] = offset.offset }
        }
    }

    func committedOffsets(for partitions: [TopicPartition], timeout: Duration) async throws(KafkaError) -> [TopicPartition: Int64] {
        try committedOffsetsBlocking(for: partitions, timeout: timeout)
    }

    func committedOffsetsBlocking(for partitions: [TopicPartition], timeout: Duration) throws(KafkaError) -> [TopicPartition: Int64] {
        let committed = kafka.cluster.withLock { $0.committed[group] ?? [:] }
        return committed.filter { partitions.contains($0.key) }
    }

    func cachedEndOffset(_ partition: TopicPartition) -> Int64? {
        Int64(kafka.records(partition.topic, partition.partition).count)
    }

    // MARK: What the test does as the group and the broker

    /// The group assigns `partitions` to this member.
    func groupAssigns(_ partitions: [TopicPartition]) {
        poll.withLock { _ in
            place(partitions, offsets: [:])
            continuation.yield([.assigned(partitions)])
        }
    }

    /// The group revokes `partitions`: the handler runs (on a thread of its
    /// own), stored offsets are committed, the partitions are unassigned.
    func groupRevokes(_ partitions: [TopicPartition], lost: Bool = false) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread { [self] in
                revoke(partitions, lost: lost)
                done.resume()
            }.start()
        }
    }

    private func revoke(_ partitions: [TopicPartition], lost: Bool = false) {
        poll.withLock { _ in
            onRevocation?(partitions, lost)
            if !lost { try? commitBlocking() }
            state.withLock { state in
                for partition in partitions {
                    state.assigned.remove(partition)
                    state.paused.remove(partition)
                    state.positions[partition] = nil
                    state.stored[partition] = nil
                }
            }
            continuation.yield([.revoked(partitions, lost: lost)])
        }
    }

    func pump() {
        poll.withLock { _ in
            let reading = state.withLock { state in
                state.closed ? [] : state.assigned.subtracting(state.paused).map { ($0, state.positions[$0] ?? 0) }
            }
            var events: [KafkaConsumerEvent] = []
            for (partition, position) in reading {
                let records = kafka.records(partition.topic, partition.partition).dropFirst(Int(position))
                guard let last = records.last else { continue }
                events += records.map { .record($0) }
                state.withLock { $0.positions[partition] = last.offset + 1 }
            }
            if !events.isEmpty { continuation.yield(events) }
        }
    }
}

/// Writes records at once; each delivery is acknowledged at once.
final class FakeProducer: ProducerPort {
    let kafka: FakeKafka

    init(kafka: FakeKafka) {
        self.kafka = kafka
    }

    func enqueue(topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader]) throws(KafkaError) -> KafkaPendingDelivery {
        let partition = partition ?? key.map { Murmur2Partitioner.partition(forKey: $0, partitionCount: kafka.partitionCount) } ?? 0
        let offset = kafka.append(topic: topic, partition: partition, key: key, value: value)
        let promise = KafkaDeliveryPromise(topic: topic)
        promise.resolve(.success(KafkaDeliveryReport(topic: topic, partition: partition, offset: offset)))
        return promise.pending
    }
}

/// Reads partitions to their end as they stand when asked.
struct FakeReader: PartitionReaderPort {
    let kafka: FakeKafka

    func read(
        _ reads: [TopicPartition: PartitionRead], timeout: Duration, _ body: (PartitionReadEvent) async throws -> Void
    ) async throws {
        for (partition, read) in reads.sorted(by: { $0.key < $1.key }) {
            let records = kafka.records(partition.topic, partition.partition)
            switch read {
            case .records:
                if !records.isEmpty { try await body(.records(partition, records)) }
            case .latestPerKey:
                var last: [[UInt8]: KafkaRecord] = [:]
                for record in records { last[record.key ?? []] = record }
                let latest = last.values.sorted { $0.offset < $1.offset }
                if !latest.isEmpty { try await body(.records(partition, latest)) }
            case .endOffset:
                break
            case .recordsSince, .latestRecordsSince:
                throw KafkaError(code: .restore, message: "reads by time are not faked")
            }
            try await body(.caughtUp(partition, endOffset: Int64(records.count)))
        }
    }
}
