import CRdKafka
import Kafka
import Testing

@Suite("Produce and consume against the embedded cluster")
struct ProduceConsumeTests {
    @Test func roundTripKeepsKeysNullKeysHeadersAndTombstones() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("round-trip")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())

        let sent: [KafkaRecord] = [
            KafkaRecord(
                topic: topic, partition: 0, offset: 0, key: Array("match-42".utf8), value: Array(#"{"a":1}"#.utf8),
                headers: [
                    KafkaHeader(key: "trace", value: [1, 2, 3]), KafkaHeader(key: "empty", value: []),
                    KafkaHeader(key: "null", value: nil), KafkaHeader(key: "trace", value: [4]),
                ]),
            KafkaRecord(topic: topic, partition: 0, offset: 1, key: nil, value: Array("no key".utf8)),
            KafkaRecord(topic: topic, partition: 0, offset: 2, key: Array("match-42".utf8), value: nil),
            KafkaRecord(topic: topic, partition: 0, offset: 3, key: [], value: []),
        ]
        for record in sent {
            let report = try await producer.send(
                topic: topic, key: record.key, value: record.value, partition: 0, headers: record.headers)
            #expect(report == KafkaDeliveryReport(topic: topic, partition: 0, offset: record.offset))
        }

        let harness = try ConsumerHarness(
            "round-trip", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")),
            topics: [topic], storeOffsets: true)
        harness.start()
        try await waitFor("4 records") { harness.records.count >= 4 ? true : nil }
        let received = harness.records
        #expect(received.count == 4)
        for (got, want) in zip(received, sent) {
            #expect(got.topic == want.topic)
            #expect(got.offset == want.offset)
            #expect(got.key == want.key)
            #expect(got.value == want.value)
            #expect(got.headers == want.headers)
            #expect(got.timestampMilliseconds != nil)
        }
        #expect(received[1].key == nil)
        #expect(received[2].isTombstone)
        #expect(received[3].value == [])
        // The assignment came first.
        #expect(harness.allEvents.first == .assigned([TopicPartition(topic: topic, partition: 0)]))
        try await harness.stop()
    }

    @Test("batches compressed with lz4 (the worker's producer) and zstd are read back as sent", arguments: [
        KafkaProducerConfiguration.Compression.lz4, .zstd,
    ])
    func compressedBatchesRoundTrip(_ compression: KafkaProducerConfiguration.Compression) async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("compressed")
        try cluster.createTopic(topic, partitions: 1)
        var configuration = testProducerConfiguration(cluster: cluster)
        configuration.compression = compression
        configuration.linger = .milliseconds(20)
        #expect(configuration.librdkafkaProperties["compression.type"] == compression.rawValue)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger())
        // Records alike enough to share batches that shrink, and one that does not compress.
        var values = (0..<200).map { Array(#"{"activity_id":"match-\#($0)","content_state":{"teamOneScore":\#($0)}}"#.utf8) }
        values.append((0..<4_096).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })
        let pending = try values.map { value in try producer.enqueue(topic: topic, key: nil, value: value, partition: 0) }
        for delivery in pending { _ = try await delivery.wait() }

        let harness = try ConsumerHarness(
            "compressed", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")), topics: [topic], storeOffsets: false)
        harness.start()
        try await waitFor("\(values.count) records") { harness.records.count >= values.count ? true : nil }
        #expect(harness.records.map(\.value) == values.map { Optional($0) })
        #expect(harness.records.map(\.offset) == (0..<Int64(values.count)).map { $0 })
        try await harness.stop()
    }

    @Test("a topic compressed otherwise than the producer's default is written and read back as sent")
    func aTopicOfItsOwnCompression() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let compressed = uniqueName("lz4")
        let plain = uniqueName("plain")
        try cluster.createTopic(compressed, partitions: 1)
        try cluster.createTopic(plain, partitions: 1)
        var configuration = testProducerConfiguration(cluster: cluster)
        configuration.compression = .lz4
        configuration.topicCompression[plain] = KafkaProducerConfiguration.Compression.none
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger())
        let values = (0..<50).map { Array(#"{"token":"\#($0)","activity_id":"match-1"}"#.utf8) }
        for value in values {
            _ = try await producer.send(topic: compressed, key: nil, value: value, partition: 0)
            _ = try await producer.send(topic: plain, key: nil, value: value, partition: 0)
        }
        let harness = try ConsumerHarness(
            "own-compression", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")), topics: [compressed, plain],
            storeOffsets: false)
        harness.start()
        try await waitFor("both topics' records") { harness.records.count >= 2 * values.count ? true : nil }
        for topic in [compressed, plain] {
            #expect(harness.records.filter { $0.topic == topic }.map(\.value) == values.map { Optional($0) })
        }
        try await harness.stop()
    }

    @Test func theCachedEndOffsetFollowsTheFetchesWithoutAskingTheBroker() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        let topic = uniqueName("end-offset")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        let harness = try ConsumerHarness(
            "end-offset", configuration: fastConsumerConfiguration(cluster: cluster, group: uniqueName("g")), topics: [topic], storeOffsets: false)
        let first = TopicPartition(topic: topic, partition: 0)
        #expect(harness.consumer.cachedEndOffset(first) == nil, "nothing fetched yet")
        harness.start()
        for index in 0..<25 { _ = try await producer.send(topic: topic, key: nil, value: Array("\(index)".utf8), partition: 0) }
        try await waitFor("25 records") { harness.records.count >= 25 ? true : nil }
        try await waitFor("the end offset as of the last fetch") { harness.consumer.cachedEndOffset(first) == 25 ? true : nil }
        for index in 0..<5 { _ = try await producer.send(topic: topic, key: nil, value: Array("\(index)".utf8), partition: 0) }
        try await waitFor("30 records") { harness.records.count >= 30 ? true : nil }
        try await waitFor("the end offset moved on") { harness.consumer.cachedEndOffset(first) == 30 ? true : nil }
        #expect(harness.consumer.cachedEndOffset(TopicPartition(topic: uniqueName("unknown"), partition: 0)) == nil)
        try await harness.stop()
    }

    @Test func keyedRecordsLandWhereTheJavaPartitionerPutsThem() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: testLogger("cluster"))
        let topic = uniqueName("placement")
        try cluster.createTopic(topic, partitions: 7)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
        for index in 0..<40 {
            let key = "activity-\(index)"
            let report = try await producer.send(topic: topic, key: Array(key.utf8), value: Array("v".utf8))
            #expect(report.partition == Murmur2Partitioner.partition(forKey: key, partitionCount: 7), "\(key)")
        }
    }

    @Test func metadataReportsPartitionCountsAndCreatesTopics() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 2, logger: testLogger("cluster"))
        try cluster.createTopic("livedispatch.commands", partitions: 6)
        let admin = try KafkaAdmin(configuration: cluster.clientConfiguration(), logger: testLogger())
        #expect(try await admin.partitionCount(topic: "livedispatch.commands") == 6)
        #expect(try await admin.partitionCount(topic: "missing") == nil)
        try cluster.createTopic("livedispatch.tokens", partitions: 6)
        try cluster.createTopic("livedispatch.token-store", partitions: 4)
        #expect(try await admin.requireSamePartitionCount(["livedispatch.commands", "livedispatch.tokens"]) == 6)
        await #expect {
            try await admin.requireSamePartitionCount(["livedispatch.commands", "livedispatch.token-store", "gone"])
        } throws: { error in
            let message = (error as? KafkaError)?.message ?? ""
            return message.contains("livedispatch.commands: 6") && message.contains("livedispatch.token-store: 4")
                && message.contains("gone: missing")
        }
        // librdkafka 2.0.2's mock cluster has no controller and does not
        // implement CreateTopics: the request must fail with librdkafka's own
        // explanation instead of hanging or pretending to succeed.
        await #expect {
            try await admin.createTopics(
                [KafkaTopicSpecification(name: "livedispatch.state", partitions: 6, config: ["cleanup.policy": "compact"])],
                timeout: .seconds(2))
        } throws: { error in
            guard let error = error as? KafkaError else { return false }
            return error.code == .topicCreation && error.librdkafkaMessage != nil
        }
        #expect(try await admin.createTopics([]) == [])
    }

    @Test func unknownPropertyIsReportedWithLibrdkafkasText() throws {
        var configuration = KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: ["127.0.0.1:1"]))
        configuration.client.properties["no.such.property"] = "1"
        #expect {
            _ = try KafkaProducer(configuration: configuration, logger: testLogger())
        } throws: { error in
            guard let error = error as? KafkaError else { return false }
            return error.code == .configuration && error.message.contains("no.such.property")
                && (error.librdkafkaMessage?.contains("No such configuration property") ?? false)
        }
    }

    @Test func typedSettingsMapToLibrdkafkaPropertiesAndRawOnesWin() {
        var client = KafkaClientConfiguration(bootstrapServers: ["a:9092", "b:9092"], clientID: "worker-1")
        client.properties["security.protocol"] = "SASL_SSL"
        client.properties["session.timeout.ms"] = "7000"
        let consumer = KafkaConsumerConfiguration(client: client, groupID: "livedispatch", groupInstanceID: "pod-1")
        let properties = consumer.librdkafkaProperties
        #expect(properties["bootstrap.servers"] == "a:9092,b:9092")
        #expect(properties["client.id"] == "worker-1")
        #expect(properties["group.instance.id"] == "pod-1")
        #expect(properties["partition.assignment.strategy"] == "cooperative-sticky")
        #expect(properties["enable.auto.offset.store"] == "false")
        #expect(properties["allow.auto.create.topics"] == nil)  // librdkafka's consumer default: false
        #expect(properties["security.protocol"] == "SASL_SSL")
        #expect(properties["session.timeout.ms"] == "7000")
        // A small prefetch unless the raw properties name one.
        #expect(properties["queued.max.messages.kbytes"] == "4096")
        #expect(properties["queued.min.messages"] == "8192")
        // The wait once that much is queued, only where librdkafka knows it (2.2 and later).
        #expect(properties["fetch.queue.backoff.ms"] == (rd_kafka_version() >= 0x0202_0000 ? "10" : nil))
        client.properties["queued.max.messages.kbytes"] = "65536"
        #expect(KafkaConsumerConfiguration(client: client, groupID: "g").librdkafkaProperties["queued.max.messages.kbytes"] == "65536")
        let producer = KafkaProducerConfiguration(client: client, linger: .milliseconds(20)).librdkafkaProperties
        #expect(producer["linger.ms"] == "20")
        #expect(producer["partitioner"] == "murmur2_random")
        #expect(producer["allow.auto.create.topics"] == "false")
        #expect(producer["compression.type"] == "none")
        client.properties["compression.type"] = "gzip"
        #expect(KafkaProducerConfiguration(client: client, compression: .lz4).librdkafkaProperties["compression.type"] == "gzip")
    }
}
