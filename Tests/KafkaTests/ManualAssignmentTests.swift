import Kafka
import Synchronization
import Testing

/// What the dispatcher builds its partition moves on: a consumer that
/// assigns partitions itself and commits under a group no member joins,
/// and a group member's revocation handler, whose stored offsets are
/// committed before the partition goes to another member.
@Suite("Manual assignment and the revocation handler against the embedded cluster")
struct ManualAssignmentTests {
    @Test("a manually assigning consumer reads from given offsets, commits under its group, stops at unassign; the next one resumes at the commit")
    func manualAssignment() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("manual")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await produce(producer, topic: topic, count: 40, partition: 0)
        try await produce(producer, topic: topic, count: 40, partition: 1)
        let configuration = fastConsumerConfiguration(cluster: cluster, group: uniqueName("offsets"))
        let zero = TopicPartition(topic: topic, partition: 0)
        let one = TopicPartition(topic: topic, partition: 1)

        let first = try KafkaConsumer(assigningManually: configuration, logger: testLogger("first"))
        let firstLog = EventLog()
        let firstRun = Task { try await first.runUntilClosed() }
        let firstReader = Task { for await event in first.events { firstLog.append(event) } }
        try first.assign([zero], offsets: [zero: 10])
        let read = try await waitFor("partition 0 from offset 10 to its end") { () -> [Int64]? in
            let offsets = firstLog.all.compactMap { event -> Int64? in
                if case .record(let record) = event { return record.offset }
                return nil
            }
            return offsets.count >= 30 ? offsets : nil
        }
        #expect(read == Array(10..<40), "read \(read)")
        #expect(first.assignment == [zero])
        #expect(firstLog.all.allSatisfy { if case .record(let record) = $0 { record.partition == 0 } else { false } })
        // A group consumer's partitions come from its group, not from assign.
        let member = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger("member"))
        #expect(throws: KafkaError.self) { try member.assign([one]) }

        try first.storeOffsets([KafkaCommitOffset(topicPartition: zero, offset: 40)])
        try first.commitBlocking()
        try first.unassign([zero])
        #expect(first.assignment.isEmpty)
        try await produce(producer, topic: topic, count: 5, partition: 0)

        let second = try KafkaConsumer(assigningManually: configuration, logger: testLogger("second"))
        let secondLog = EventLog()
        let secondRun = Task { try await second.runUntilClosed() }
        let secondReader = Task { for await event in second.events { secondLog.append(event) } }
        try second.assign([zero])
        let resumed = try await waitFor("the next consumer to read the records after the commit") { () -> [Int64]? in
            let offsets = secondLog.all.compactMap { event -> Int64? in
                if case .record(let record) = event { return record.offset }
                return nil
            }
            return offsets.count >= 5 ? offsets : nil
        }
        #expect(resumed == Array(40..<45))
        // The unassigned consumer read nothing past what it had.
        #expect(firstLog.all.count == 30)
        #expect(try await second.committedOffsets(for: [zero, one]) == [zero: 40])

        first.close()
        second.close()
        try await firstRun.value
        try await secondRun.value
        await firstReader.value
        await secondReader.value
    }

    @Test("offsets a revocation handler stores are committed before the partition moves: the member that takes it starts there")
    func revocationHandlerCommitsFirst() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("revoke")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for partition: Int32 in 0...1 { try await produce(producer, topic: topic, count: 30, partition: partition) }
        let configuration = fastConsumerConfiguration(cluster: cluster, group: uniqueName("handover"))

        // The first member finishes records only when it is told to let go:
        // its handler stores offset 20 of each partition revoked.
        let revocations = Mutex<[(partitions: [TopicPartition], lost: Bool)]>([])
        let firstHolder = Mutex<KafkaConsumer?>(nil)
        let first = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger("first")) { partitions, lost in
            revocations.withLock { $0.append((partitions, lost)) }
            let offsets = partitions.map { KafkaCommitOffset(topicPartition: $0, offset: 20) }
            try? firstHolder.withLock { $0 }?.storeOffsets(offsets)
        }
        firstHolder.withLock { $0 = first }
        let firstLog = EventLog()
        let firstRun = Task { try await first.runUntilClosed() }
        let firstReader = Task { for await event in first.events { firstLog.append(event) } }
        try await waitFor("the first member to own both partitions") { first.assignment.count == 2 ? true : nil }

        let second = try ConsumerHarness("second", configuration: configuration, topics: [topic], storeOffsets: true)
        second.start()
        let moved = try await waitFor("one partition to move to the second member") { () -> TopicPartition? in
            let (a, b) = (first.assignment, second.assignment)
            return a.count == 1 && b.count == 1 && a.isDisjoint(with: b) ? b.first : nil
        }
        let handled = revocations.withLock { $0 }
        #expect(handled.count == 1)
        #expect(handled.first?.partitions == [moved])
        #expect(handled.first?.lost == false)
        let taken = try await waitFor("the second member's first records of the moved partition") { () -> [Int64]? in
            let offsets = second.records.filter { $0.topicPartition == moved }.map(\.offset)
            return offsets.count >= 10 ? offsets : nil
        }
        #expect(taken.first == 20, "the moved partition was read from \(taken.first ?? -1), not from the offset stored on revocation")
        // The revocation handler ran before the `.revoked` event was handed on.
        #expect(firstLog.all.contains(.revoked([moved], lost: false)))

        first.close()
        try await firstRun.value
        await firstReader.value
        try await second.stop()
    }
}
