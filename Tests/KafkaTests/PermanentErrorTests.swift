import Kafka
import Testing

/// Which produce failures are about the record itself, so that callers stop
/// retrying them.
@Suite("Permanent produce errors")
struct PermanentErrorTests {
    @Test("a record over the producer's message.max.bytes is refused at once, as permanent")
    func tooLargeLocally() throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("large")
        try cluster.createTopic(topic, partitions: 1)
        var configuration = testProducerConfiguration(cluster: cluster)
        configuration.client.properties["message.max.bytes"] = "10000"
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger())
        let error = try #require(throws: KafkaError.self) {
            try producer.enqueue(topic: topic, key: nil, value: Array(repeating: 1, count: 20_000))
        }
        #expect(error.isPermanent)
        #expect(!error.isRetryable)
        #expect(error.librdkafkaError == "MSG_SIZE_TOO_LARGE")
    }

    @Test("a broker answering MSG_SIZE_TOO_LARGE or an invalid topic fails the delivery as permanent")
    func tooLargeAtTheBroker() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("refused")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for refusal in [KafkaProtocolError.messageTooLarge, .invalidTopic] {
            cluster.pushRequestErrors(.produce, [refusal])
            do {
                try await producer.send(topic: topic, key: nil, value: Array("x".utf8))
                Issue.record("a refused record was delivered (\(refusal.rawValue))")
            } catch {
                #expect(error.isPermanent, "\(error)")
                #expect(error.code == .delivery)
            }
        }
        // A leader change is transient: librdkafka retries it and the record is stored.
        cluster.pushRequestErrors(.produce, [.notLeaderForPartition])
        let report = try await producer.send(topic: topic, key: nil, value: Array("y".utf8))
        #expect(report.topic == topic)
    }
}
