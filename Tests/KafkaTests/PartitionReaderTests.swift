import Foundation
import Kafka
import Testing

@Suite("Restore reads against the embedded cluster")
struct PartitionReaderTests {
    @Test func readsAPartitionToItsEndOffset() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("state")
        try cluster.createTopic(topic, partitions: 3)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for index in 0..<50 {
            // Every fifth record is a tombstone, as a compacted changelog has.
            try await producer.send(
                topic: topic, key: Array("activity-\(index % 10)".utf8),
                value: index % 5 == 4 ? nil : Array("state-\(index)".utf8), partition: 1)
        }
        try await producer.send(topic: topic, key: Array("other".utf8), value: [1], partition: 2)

        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        var seen: [KafkaRecord] = []
        let end = try await reader.readToEnd(topic: topic, partition: 1) { seen.append($0) }
        #expect(end == 50)
        #expect(seen.map(\.offset) == Array(0..<50))
        #expect(seen.filter(\.isTombstone).count == 10)
        #expect(seen[3].value == Array("state-3".utf8))
        #expect(seen.allSatisfy { $0.partition == 1 && $0.topic == topic })

        // An empty partition returns at once.
        #expect(try await reader.readAll(topic: topic, partition: 0).isEmpty)
        // Records produced after the read started are not waited for.
        #expect(try await reader.readAll(topic: topic, partition: 2).count == 1)

        // The end offset: after the last record, 0 for an empty partition.
        #expect(try await reader.endOffset(topic: topic, partition: 1) == 50)
        #expect(try await reader.endOffset(topic: topic, partition: 2) == 1)
        #expect(try await reader.endOffset(topic: topic, partition: 0) == 0)
    }

    /// A restore's reads on one client: two changelogs from their
    /// beginning, every record, and two inputs' ends only.
    @Test func readsSeveralPartitionsAtOnce() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let changelog = uniqueName("state")
        let input = uniqueName("commands")
        try cluster.createTopic(changelog, partitions: 2)
        try cluster.createTopic(input, partitions: 3)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for index in 0..<1_500 {
            try await producer.send(topic: changelog, key: Array("activity-\(index % 10)".utf8), value: Array("state-\(index)".utf8), partition: 1)
        }
        for index in 0..<3 {
            try await producer.send(topic: input, key: nil, value: Array("command-\(index)".utf8), partition: 0)
        }
        try await producer.send(topic: input, key: nil, value: [1], partition: 2)

        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        let full = TopicPartition(topic: changelog, partition: 1)
        let empty = TopicPartition(topic: changelog, partition: 0)
        let three = TopicPartition(topic: input, partition: 0)
        let one = TopicPartition(topic: input, partition: 2)
        var records: [TopicPartition: [Int64]] = [:]
        var ends: [TopicPartition: Int64] = [:]
        try await reader.read([full: .records, empty: .records, three: .endOffset, one: .endOffset]) { event in
            switch event {
            case .records(let partition, let batch):
                #expect(ends[partition] == nil, "records of \(partition) after its end")
                #expect(batch.allSatisfy { $0.topicPartition == partition })
                records[partition, default: []] += batch.map(\.offset)
            case .caughtUp(let partition, let end):
                #expect(ends[partition] == nil, "\(partition) caught up twice")
                ends[partition] = end
            }
        }
        #expect(ends == [full: 1_500, empty: 0, three: 3, one: 1])
        // Every record of the changelog in order, none of the inputs'.
        #expect(records == [full: Array(0..<1_500)])

        // A partition that does not exist fails the read.
        await #expect(throws: KafkaError.self) {
            try await reader.read([TopicPartition(topic: input, partition: 7): .endOffset, full: .records], timeout: .seconds(5)) { _ in }
        }
    }

    /// A changelog read for its last record per key: 1,300 records of 1,100
    /// keys (more than a batch), the last of some a tombstone.
    @Test func readsEachKeysLastRecord() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("state")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        var last: [String: (offset: Int64, value: [UInt8]?)] = [:]
        for index in 0..<1_300 {
            let key = "activity-\(index % 1_100)"
            let value: [UInt8]? = index >= 1_250 ? nil : Array("state-\(index)".utf8)
            try await producer.send(topic: topic, key: Array(key.utf8), value: value, partition: 0)
            last[key] = (Int64(index), value)
        }
        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        let partition = TopicPartition(topic: topic, partition: 0)
        var seen: [KafkaRecord] = []
        var end: Int64?
        try await reader.read([partition: .latestPerKey]) { event in
            switch event {
            case .records(_, let batch):
                #expect(end == nil, "records after the end")
                #expect(batch.count <= 1_024)
                seen += batch
            case .caughtUp(_, let offset): end = offset
            }
        }
        #expect(end == 1_300)
        #expect(seen.count == 1_100)
        #expect(seen.map(\.offset) == seen.map(\.offset).sorted())
        #expect(seen.filter(\.isTombstone).count == 50)
        for record in seen {
            let key = String(decoding: record.key ?? [], as: UTF8.self)
            #expect(last[key]?.offset == record.offset && last[key]?.value == record.value, "\(key) at \(record.offset)")
        }
    }

    /// The mock cluster cannot look records up by time (it answers "none
    /// that recent"); the reader then checks the last record's time and
    /// reads from the beginning, skipping older records.
    @Test func readsFromATime() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("events")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for index in 0..<5 {
            try await producer.send(topic: topic, key: nil, value: Array("event-\(index)".utf8), partition: 0)
        }
        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var recent: [Int64] = []
        try await reader.readBatchesToEnd(topic: topic, partition: 0, since: now - 60_000) { recent += $0.map(\.offset) }
        #expect(recent == [0, 1, 2, 3, 4])
        var future: [Int64] = []
        let end = try await reader.readBatchesToEnd(topic: topic, partition: 0, since: now + 60_000) { future += $0.map(\.offset) }
        #expect(future.isEmpty)
        #expect(end == 5)
    }

    @Test func missingPartitionIsReported() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("state")
        try cluster.createTopic(topic, partitions: 1)
        let reader = KafkaPartitionReader(configuration: cluster.clientConfiguration(), logger: testLogger())
        await #expect(throws: KafkaError.self) {
            try await reader.readAll(topic: topic, partition: 7, timeout: .seconds(5))
        }
    }
}
