import Kafka
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

@Suite("Consumer and producer as ServiceLifecycle services")
struct ServiceLifecycleTests {
    @Test func gracefulShutdownCommitsStoredOffsetsAndEndsTheEvents() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("shutdown")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        let reports = try await produce(producer, topic: topic, count: 50)
        let configuration = fastConsumerConfiguration(cluster: cluster, group: uniqueName("g"))
        let partitions = [TopicPartition(topic: topic, partition: 0), TopicPartition(topic: topic, partition: 1)]

        let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger())
        let events = EventLog()
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                group.addTask {
                    var processed = 0
                    for await event in consumer.events {
                        events.append(event)
                        guard case .record(let record) = event else { continue }
                        // Only the first 30 records are finished before shutdown.
                        processed += 1
                        if processed <= 30 { try consumer.storeOffset(record) }
                        if processed == 30 { try consumer.commitAsync() }
                        if processed == 50 { trigger.triggerGracefulShutdown() }
                    }
                }
                try await group.waitForAll()
            }
        }
        let seen = events.all
        #expect(seen.filter { if case .record = $0 { true } else { false } }.count == 50)
        // Leaving the group revoked what was assigned, after the last record.
        #expect(seen.last.map { if case .revoked(let revoked, lost: false) = $0 { Set(revoked) == Set(partitions) } else { false } } == true)

        // Exactly the stored offsets were committed: the first 30 records per partition order.
        let storedRecords = seen.compactMap { event -> KafkaRecord? in
            if case .record(let record) = event { return record }
            return nil
        }.prefix(30)
        var expected: [TopicPartition: Int64] = [:]
        for record in storedRecords { expected[record.topicPartition] = max(expected[record.topicPartition] ?? 0, record.offset + 1) }
        let checker = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger())
        #expect(try await checker.committedOffsets(for: partitions) == expected)
        #expect(reports.count == 50)
    }

    @Test func producerFlushesOnGracefulShutdown() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("flush")
        try cluster.createTopic(topic, partitions: 1)
        var configuration = testProducerConfiguration(cluster: cluster)
        configuration.linger = .milliseconds(200)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger())
        let delivered = Counter()
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                for index in 0..<100 {
                    group.addTask {
                        try await producer.send(topic: topic, key: nil, value: Array("\(index)".utf8))
                        delivered.increment()
                    }
                }
                try await waitFor("records to be queued") { producer.outstandingRecords > 0 ? true : nil }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(producer.outstandingRecords == 0)
        #expect(delivered.value == 100)
    }

    @Test func aTinyEventBufferStillDeliversEverythingInOrder() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("tiny-buffer")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        try await produce(producer, topic: topic, count: 500, partition: 0)
        let configuration = fastConsumerConfiguration(cluster: cluster, group: uniqueName("g"), bufferCapacity: 4)
        let consumer = try KafkaConsumer(configuration: configuration, topics: [topic], logger: testLogger())
        let service = Task { try await consumer.run() }
        var offsets: [Int64] = []
        for await event in consumer.events {
            guard case .record(let record) = event else { continue }
            offsets.append(record.offset)
            if offsets.count == 500 { consumer.close() }
        }
        try await service.value
        #expect(offsets == Array(0..<500))
    }
}
