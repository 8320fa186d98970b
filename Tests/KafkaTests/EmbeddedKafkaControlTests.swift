import Kafka
import Testing

@Suite("Control lines of the embedded cluster")
struct EmbeddedKafkaControlTests {
    @Test func parsesEveryCommand() throws {
        #expect(try EmbeddedKafkaControl(parsing: "broker-down 1") == .brokerDown(1))
        #expect(try EmbeddedKafkaControl(parsing: " broker-up\t2 ") == .brokerUp(2))
        #expect(try EmbeddedKafkaControl(parsing: "errors offset-commit 15 20")
            == .requestErrors(.offsetCommit, .coordinatorNotAvailable, count: 20))
        #expect(try EmbeddedKafkaControl(parsing: "clear-errors fetch") == .clearRequestErrors(.fetch))
    }

    @Test(arguments: [
        ("", "empty command"),
        ("reboot", "unknown command 'reboot'"),
        ("broker-down", "usage: broker-down BROKER-ID"),
        ("broker-down one", "broker id 'one' is not a whole number from 1 to 1000"),
        ("broker-up 0", "broker id '0' is not"),
        ("errors produce 6", "usage: errors API CODE COUNT"),
        ("errors gossip 6 1", "unknown API 'gossip'"),
        ("errors produce 6 0", "count '0' is not a whole number from 1 to 10000"),
        ("errors produce 6 99999999999999999999", "count '99999999999999999999' is not"),
        ("errors produce -3 1", "error code '-3' is not"),
    ])
    func refusesBadLinesSayingWhy(line: String, message: String) {
        #expect(throws: EmbeddedKafkaControlError.self) { try EmbeddedKafkaControl(parsing: line) }
        do {
            _ = try EmbeddedKafkaControl(parsing: line)
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test func queuedErrorsFailRequestsUntilCleared() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("control")
        try cluster.createTopic(topic, partitions: 1)
        try EmbeddedKafkaControl(parsing: "errors produce 87 1000").apply(to: cluster)
        var configuration = testProducerConfiguration(cluster: cluster)
        configuration.deliveryTimeout = .seconds(2)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger())
        await #expect(throws: KafkaError.self) { try await producer.send(topic: topic, key: [1], value: [1]) }
        try EmbeddedKafkaControl(parsing: "clear-errors produce").apply(to: cluster)
        _ = try await producer.send(topic: topic, key: [2], value: [2])
    }
}
