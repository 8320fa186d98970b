import Kafka
import Synchronization
import Testing

@Suite("Faults injected into the embedded cluster")
struct FaultToleranceTests {
    @Test func brokerDownAndBackUpLosesNothing() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: testLogger("cluster"))
        let topic = uniqueName("outage")
        try cluster.createTopic(topic, partitions: 3)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        var reports = try await produce(producer, topic: topic, count: 30, prefix: "before-")
        let harness = try ConsumerHarness(
            "outage", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")),
            topics: [topic], storeOffsets: true)
        harness.start()
        try await waitFor("records before the outage") { harness.records.count >= 30 ? true : nil }

        try cluster.setBrokerDown(1)
        let finished = Atomic<Bool>(false)
        let during = Task {
            defer { finished.store(true, ordering: .sequentiallyConsistent) }
            return try await produce(producer, topic: topic, count: 30, prefix: "during-")
        }
        // Normally records for the partition led by broker 1 wait in the
        // queue; on a loaded machine the batch may also be done already.
        try await waitFor("records queued while the broker is down") {
            producer.outstandingRecords > 0 || finished.load(ordering: .sequentiallyConsistent) ? true : nil
        }
        try cluster.setBrokerUp(1)
        reports += try await during.value

        let expected = Set(reports.map { "\($0.partition)/\($0.offset)" })
        try await waitFor("every record after the outage") {
            Set(harness.records.map { "\($0.partition)/\($0.offset)" }).isSuperset(of: expected) ? true : nil
        }
        try await harness.stop()
    }

    @Test func retriableProduceErrorsAreRetriedAndOthersReported() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("produce-errors")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await producer.send(topic: topic, key: nil, value: [0])

        cluster.pushRequestErrors(.produce, [.notLeaderForPartition, .requestTimedOut, .notEnoughReplicas])
        let report = try await producer.send(topic: topic, key: Array("k".utf8), value: [1])
        #expect(report.offset == 1)

        // CORRUPT_MESSAGE (2, librdkafka's INVALID_MSG) is not retriable: the sender hears about it.
        cluster.pushRequestErrors(.produce, [KafkaProtocolError(rawValue: 2)])
        await #expect {
            try await producer.send(topic: topic, key: Array("k".utf8), value: [2])
        } throws: { error in
            guard let error = error as? KafkaError else { return false }
            return error.code == .delivery && error.librdkafkaError == "INVALID_MSG" && !error.isRetryable
        }
        // The producer goes on working.
        #expect(try await producer.send(topic: topic, key: nil, value: [3]).offset == 2)
    }

    @Test func fetchAndOffsetCommitErrorsAreRecovered() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("consume-errors")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        let reports = try await produce(producer, topic: topic, count: 40)
        let expected = Set(reports.map { "\($0.partition)/\($0.offset)" })

        cluster.pushRequestErrors(.fetch, [.notLeaderForPartition, .requestTimedOut, .unknownTopicOrPartition])
        let harness = try ConsumerHarness(
            "fetch-errors", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")),
            topics: [topic], storeOffsets: true)
        harness.start()
        try await waitFor("every record despite fetch errors") {
            Set(harness.records.map { "\($0.partition)/\($0.offset)" }).isSuperset(of: expected) ? true : nil
        }

        cluster.pushRequestErrors(.offsetCommit, [.coordinatorNotAvailable])
        do {
            try await harness.consumer.commit()
        } catch {
            // A failed commit must be reported as retriable, and a retry must succeed.
            #expect(error.isRetryable, "\(error)")
            try await harness.consumer.commit()
        }
        let partitions = [TopicPartition(topic: topic, partition: 0), TopicPartition(topic: topic, partition: 1)]
        #expect(try await harness.consumer.committedOffsets(for: partitions) == endOffsets(reports))
        try await harness.stop()
    }

    @Test func clearedErrorsAreNotServedAndSlowBrokersStillDeliver() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("slow")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await producer.send(topic: topic, key: nil, value: [0])

        // A queued non-retriable error would fail the next send; cleared, it never comes.
        cluster.pushRequestErrors(.produce, [KafkaProtocolError(rawValue: 2)])
        cluster.clearRequestErrors(.produce)
        #expect(try await producer.send(topic: topic, key: nil, value: [1]).offset == 1)

        try cluster.setRoundTripTime(.milliseconds(300), broker: 1)
        #expect(try await producer.send(topic: topic, key: nil, value: [2]).offset == 2)
        try cluster.setRoundTripTime(.zero, broker: 1)
        #expect(throws: KafkaError.self) { try cluster.setBrokerDown(42) }
    }
}
