import Foundation
import Kafka
import Testing

@Suite("Record samples spread over partitions")
struct RecordSampleTests {
    static func partition(_ number: Int32) -> TopicPartition { TopicPartition(topic: "events", partition: number) }

    @Test("the limit is divided evenly; what a small partition leaves goes to the others")
    func waterFilling() {
        let counts = [Self.partition(0): 100, Self.partition(1): 10, Self.partition(2): 30, Self.partition(3): 0] as [TopicPartition: Int64]
        let shares = RecordSample.shares(counts: counts, limit: 40)
        #expect(shares == [Self.partition(0): 15, Self.partition(1): 10, Self.partition(2): 15, Self.partition(3): 0])
        #expect(shares.values.reduce(0, +) == 40)
    }

    @Test("everything is read when it fits; a limit below the partition count reads one record of the smallest")
    func edges() {
        let counts = [Self.partition(0): 5, Self.partition(1): 7] as [TopicPartition: Int64]
        #expect(RecordSample.shares(counts: counts, limit: 1_000) == counts)
        let many = Dictionary(uniqueKeysWithValues: (0..<4).map { (Self.partition($0), Int64(100 + $0)) })
        #expect(RecordSample.shares(counts: many, limit: 2) == [Self.partition(0): 1, Self.partition(1): 1, Self.partition(2): 0, Self.partition(3): 0])
        #expect(RecordSample.shares(counts: many, limit: 0).values.allSatisfy { $0 == 0 })
        #expect(RecordSample.shares(counts: [:], limit: 10).isEmpty)
    }

    @Test("against the embedded cluster: a capped read takes each partition's most recent share, every partition contributing")
    func sampleAcrossPartitions() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("events")
        let other = uniqueName("orders")
        try cluster.createTopic(topic, partitions: 3)
        try cluster.createTopic(other, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for (partition, count) in [(Int32(0), 100), (1, 10), (2, 30)] {
            for index in 0..<count {
                try await producer.send(topic: topic, key: nil, value: Array("event-\(index)".utf8), partition: partition)
            }
        }
        for index in 0..<20 { try await producer.send(topic: other, key: nil, value: Array("order-\(index)".utf8), partition: 0) }

        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        let since = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
        let partitions = (0..<3).map { TopicPartition(topic: topic, partition: $0) } + [TopicPartition(topic: other, partition: 0)]
        #expect(try await reader.counts(partitions, since: since) == [
            partitions[0]: 100, partitions[1]: 10, partitions[2]: 30, partitions[3]: 20,
        ])
        var read: [TopicPartition: [Int64]] = [:]
        try await reader.readSample(partitions, since: since, limit: 60) { records in
            for record in records { read[record.topicPartition, default: []].append(record.offset) }
        }
        // 60 over four: the 10 of partition 1, then 50 over three (17, 17, 16).
        #expect(read[partitions[1]] == Array(0..<10))
        #expect(read[partitions[3]] == Array(3..<20))
        #expect(read[partitions[2]] == Array(13..<30))
        #expect(read[partitions[0]] == Array(84..<100))
        #expect(read.values.map(\.count).reduce(0, +) == 60)
    }
}
