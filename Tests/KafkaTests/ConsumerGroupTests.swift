import Kafka
import Testing

/// Offsets one past the last delivered record of each partition.
func endOffsets(_ reports: [KafkaDeliveryReport]) -> [TopicPartition: Int64] {
    var ends: [TopicPartition: Int64] = [:]
    for report in reports {
        let partition = TopicPartition(topic: report.topic, partition: report.partition)
        ends[partition] = max(ends[partition] ?? 0, report.offset + 1)
    }
    return ends
}

@Suite("Consumer groups against the embedded cluster")
struct ConsumerGroupTests {
    @Test func membersSplitPartitionsCooperativelyAndLoseNothing() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: testLogger("cluster"))
        let topic = uniqueName("group")
        let group = uniqueName("g")
        try cluster.createTopic(topic, partitions: 6)
        let all = Set((0..<6).map { TopicPartition(topic: topic, partition: Int32($0)) })
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        var reports = try await produce(producer, topic: topic, count: 300, prefix: "a-")

        let configuration = fastConsumerConfiguration(cluster: cluster, group: group)
        let first = try ConsumerHarness("first", configuration: configuration, topics: [topic], storeOffsets: true)
        let second = try ConsumerHarness("second", configuration: configuration, topics: [topic], storeOffsets: true)
        first.start()
        second.start()
        try await waitFor("two members to split the partitions") {
            let (a, b) = (first.assignment, second.assignment)
            return !a.isEmpty && !b.isEmpty && a.isDisjoint(with: b) && a.union(b) == all ? true : nil
        }
        let firstBeforeJoin = first.assignment
        let secondBeforeJoin = second.assignment

        let third = try ConsumerHarness("third", configuration: configuration, topics: [topic], storeOffsets: true)
        third.start()
        try await waitFor("a third member to get partitions") {
            let (a, b, c) = (first.assignment, second.assignment, third.assignment)
            let disjoint = a.isDisjoint(with: b) && a.isDisjoint(with: c) && b.isDisjoint(with: c)
            return !c.isEmpty && !a.isEmpty && !b.isEmpty && disjoint && a.union(b).union(c) == all ? true : nil
        }
        // Cooperative: the existing members kept partitions they already had.
        #expect(!first.assignment.isDisjoint(with: firstBeforeJoin))
        #expect(!second.assignment.isDisjoint(with: secondBeforeJoin))
        reports += try await produce(producer, topic: topic, count: 300, prefix: "b-")

        try await first.stop()
        try await waitFor("the remaining members to take over") {
            second.assignment.union(third.assignment) == all ? true : nil
        }
        reports += try await produce(producer, topic: topic, count: 300, prefix: "c-")

        let expected = Set(reports.map { "\($0.partition)/\($0.offset)" })
        #expect(expected.count == 900)
        try await waitFor("every record to be consumed by some member") {
            let seen = Set((first.records + second.records + third.records).map { "\($0.partition)/\($0.offset)" })
            return seen.isSuperset(of: expected) ? true : nil
        }
        try await second.stop()
        try await third.stop()

        // Every event stream starts with an assignment, and no member saw a
        // record of a partition before it was assigned to it.
        for harness in [first, second, third] {
            var owned: Set<TopicPartition> = []
            for event in harness.allEvents {
                switch event {
                case .assigned(let partitions): owned.formUnion(partitions)
                case .revoked(let partitions, _): owned.subtract(partitions)
                case .record(let record): #expect(owned.contains(record.topicPartition), "\(harness.name)")
                }
            }
        }

        // Closing committed everything that was stored: the group's offsets are the end offsets.
        let checker = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger())
        let committed = try await checker.committedOffsets(for: all.sorted())
        #expect(committed == endOffsets(reports))
    }

    @Test func recordsOfAMemberThatStopsWithoutCommittingGoToTheSurvivor() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("redeliver")
        let group = uniqueName("g")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        let reports = try await produce(producer, topic: topic, count: 100)
        let expected = Set(reports.map { "\($0.partition)/\($0.offset)" })
        let configuration = fastConsumerConfiguration(cluster: cluster, group: group)

        // The first member reads everything but never stores an offset.
        let careless = try ConsumerHarness("careless", configuration: configuration, topics: [topic], storeOffsets: false)
        careless.start()
        try await waitFor("the first member to read everything") {
            Set(careless.records.map { "\($0.partition)/\($0.offset)" }) == expected ? true : nil
        }
        let survivor = try ConsumerHarness("survivor", configuration: configuration, topics: [topic], storeOffsets: true)
        survivor.start()
        try await careless.stop()
        try await waitFor("the survivor to get every record again") {
            Set(survivor.records.map { "\($0.partition)/\($0.offset)" }).isSuperset(of: expected) ? true : nil
        }
        try await survivor.consumer.commit()
        let committed = try await survivor.consumer.committedOffsets(
            for: [TopicPartition(topic: topic, partition: 0), TopicPartition(topic: topic, partition: 1)])
        #expect(committed == endOffsets(reports))
        try await survivor.stop()
    }

    @Test func pausedPartitionsStopWhileOthersFlowAndResumeLater() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("pause")
        try cluster.createTopic(topic, partitions: 2)
        let paused = TopicPartition(topic: topic, partition: 0)
        let flowing = TopicPartition(topic: topic, partition: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await produce(producer, topic: topic, count: 10, prefix: "early-", partition: 0)

        let harness = try ConsumerHarness(
            "pause", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")),
            topics: [topic], storeOffsets: true)
        harness.start()
        try await waitFor("the first records") { harness.records.count == 10 ? true : nil }
        try harness.consumer.pause([paused, TopicPartition(topic: "not-assigned", partition: 0)])
        #expect(harness.consumer.pausedPartitions == [paused])

        try await produce(producer, topic: topic, count: 10, prefix: "held-", partition: 0)
        try await produce(producer, topic: topic, count: 10, prefix: "flowing-", partition: 1)
        try await waitFor("records of the unpaused partition") {
            harness.records.filter { $0.partition == flowing.partition }.count == 10 ? true : nil
        }
        #expect(harness.records.filter { $0.partition == paused.partition }.count == 10)

        try harness.consumer.resume([paused])
        #expect(harness.consumer.pausedPartitions.isEmpty)
        try await waitFor("the held records after resume") {
            harness.records.filter { $0.partition == paused.partition }.count == 20 ? true : nil
        }
        let held = harness.records.filter { $0.partition == paused.partition }.map(\.offset)
        #expect(held == Array(0..<20))
        try await harness.stop()
        #expect(throws: KafkaError.self) { try harness.consumer.pause([paused]) }
    }

    @Test func staticMembershipConsumesWithAGroupInstanceID() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("static")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await produce(producer, topic: topic, count: 5)
        var configuration = fastConsumerConfiguration(cluster: cluster, group: uniqueName("g"))
        configuration.groupInstanceID = "worker-0"
        let harness = try ConsumerHarness("static", configuration: configuration, topics: [topic], storeOffsets: true)
        harness.start()
        try await waitFor("records") { harness.records.count == 5 ? true : nil }
        try await harness.stop()
    }
}
