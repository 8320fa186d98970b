import Foundation
import Kafka
import Synchronization
import Testing

@Suite("Fetching resumed partitions against the embedded cluster")
struct RebalanceFetchingTests {
    /// librdkafka pauses every assigned partition while the application
    /// serves a rebalance and resumes them without waking the broker
    /// thread, which then idles up to a second with nothing to fetch
    /// (``KafkaConsumer`` wakes it). A member that keeps its partitions
    /// through other members joining and leaving reads on at the pace of
    /// the records: none waits half a second.
    @Test func aMemberReadsThePartitionsItKeepsWhileOthersJoinAndLeave() async throws {
        let fixture = try LoadedTopic("keep", partitions: 4)
        let (topic, configuration) = (fixture.topic, fixture.configuration(group: uniqueName("g")))

        // The member finishes what it gives up before letting go, as the
        // dispatcher does (a hand-over mark written, sends awaited): 100 ms,
        // long enough for the fetch in flight to end while its partitions
        // are paused, leaving the broker thread with nothing to fetch.
        let staying = try KafkaConsumer(
            configuration: configuration, topics: [topic], logger: testLogger("staying"),
            onRevocation: { _, _ in usleep(100_000) })
        // What the member read, when, and how long after each record was produced.
        let seen = Mutex<[(event: KafkaConsumerEvent, at: Double)]>([])
        let run = Task { try await staying.run() }
        let reader = Task {
            for await event in staying.events {
                let now = Date().timeIntervalSince1970
                seen.withLock { $0.append((event, now)) }
            }
        }
        // A steady pace (not one paced by the broker's answers, whose bursts
        // hide the idle broker thread this test is about).
        let load = fixture.load(every: .milliseconds(20))
        defer { load.cancel() }
        try await waitFor("the staying member to read every partition") {
            Set(seen.withLock { $0.compactMap { if case .record(let record) = $0.event { record.partition } else { nil } } }).count == 4 ? true : nil
        }

        for round in 0..<2 {
            let other = try ConsumerHarness("other-\(round)", configuration: configuration, topics: [topic], storeOffsets: true)
            other.start()
            try await waitFor("a second member to get partitions") {
                !other.assignment.isEmpty && staying.assignment.count == 2 ? true : nil
            }
            try await other.stop()
            try await waitFor("the staying member to get every partition back") { staying.assignment.count == 4 ? true : nil }
        }
        let rebalances = seen.withLock { $0.filter { if case .record = $0.event { false } else { true } }.map(\.at) }
        try await waitFor("records after the last rebalance") {
            seen.withLock { $0.last.map { $0.at > (rebalances.last ?? 0) + 0.5 } ?? false } ? true : nil
        }
        load.cancel()
        staying.close()
        _ = try await run.value
        _ = await reader.value

        // A record produced while this member owned its partition, whether
        // other partitions were moving or not, is read at once: records of a
        // partition it got back are left out (they waited for the move).
        var ownedSince: [Int32: Double] = [:]
        var worst = 0.0
        var judged = 0
        for (event, at) in seen.withLock({ $0 }) {
            switch event {
            case .assigned(let partitions): for partition in partitions { ownedSince[partition.partition] = at }
            case .revoked(let partitions, _): for partition in partitions { ownedSince[partition.partition] = nil }
            case .record(let record):
                let produced = producedAt(record)
                guard let since = ownedSince[record.partition], produced > since, produced > rebalances[0] else { continue }
                judged += 1
                worst = max(worst, at - produced)
            }
        }
        #expect(rebalances.count >= 5)
        #expect(judged > 200)
        #expect(worst < 0.5, "a record of a kept partition waited \(String(format: "%.3f", worst)) s")
    }

    /// A consumer whose every partition was paused (a restore, back-pressure)
    /// reads again as soon as they are resumed, not when its idle broker
    /// thread next wakes on its own.
    @Test func aConsumerWithEveryPartitionPausedReadsAtOnceWhenResumed() async throws {
        let fixture = try LoadedTopic("resume", partitions: 2)
        let partitions = [TopicPartition(topic: fixture.topic, partition: 0), TopicPartition(topic: fixture.topic, partition: 1)]
        let configuration = fixture.configuration(group: uniqueName("g"))
        let consumer = try KafkaConsumer(assigningManually: configuration, logger: testLogger("resumed"))
        let seen = Mutex<[(record: KafkaRecord, at: Double)]>([])
        let run = Task { try await consumer.run() }
        let reader = Task {
            for await event in consumer.events {
                if case .record(let record) = event { seen.withLock { $0.append((record, Date().timeIntervalSince1970)) } }
            }
        }
        let load = fixture.load()
        defer { load.cancel() }
        try consumer.assign(partitions, offsets: [partitions[0]: 0, partitions[1]: 0])
        try await waitFor("records of both partitions") { Set(seen.withLock { $0.map(\.record.partition) }).count == 2 ? true : nil }

        var worst = 0.0
        for round in 0..<5 {
            try consumer.pause(partitions)
            // Paused once nothing has arrived for 300 ms (what was fetched drains first).
            try await waitFor("the consumer to stop reading (round \(round))") {
                let last = seen.withLock { $0.last?.at ?? 0 }
                return Date().timeIntervalSince1970 - last > 0.3 ? true : nil
            }
            let resumed = Date().timeIntervalSince1970
            try consumer.resume(partitions)
            try await waitFor("records produced after the resume (round \(round))") {
                seen.withLock { $0.contains { producedAt($0.record) > resumed + 0.2 } } ? true : nil
            }
            // How long the first records produced after the resume took to arrive.
            let after = seen.withLock { $0.filter { producedAt($0.record) > resumed } }
            worst = max(worst, after.map { $0.at - producedAt($0.record) }.max() ?? 0)
        }
        load.cancel()
        consumer.close()
        _ = try await run.value
        _ = await reader.value
        #expect(worst < 0.5, "a record produced after a resume waited \(String(format: "%.3f", worst)) s")
    }
}

/// A fresh topic on a one-broker cluster, written to without pause, and
/// consumer settings under which nothing but fetching wakes a consumer's
/// broker thread (no metadata refresh in between, short fetch waits).
private struct LoadedTopic {
    let cluster: EmbeddedKafkaCluster
    let topic: String
    let partitions: Int32
    let producer: KafkaProducer

    init(_ name: String, partitions: Int32) throws {
        cluster = try EmbeddedKafkaCluster(brokers: 1, logger: testLogger("cluster"))
        topic = uniqueName(name)
        self.partitions = partitions
        try cluster.createTopic(topic, partitions: Int(partitions))
        producer = try KafkaProducer(configuration: testProducerConfiguration(cluster: cluster), logger: testLogger())
    }

    func configuration(group: String) -> KafkaConsumerConfiguration {
        var configuration = fastConsumerConfiguration(cluster: cluster, group: group)
        configuration.client.properties["topic.metadata.refresh.interval.ms"] = "60000"
        configuration.client.properties["fetch.wait.max.ms"] = "10"
        return configuration
    }

    /// Writes one record to each partition after another until cancelled:
    /// a round `every` so long, else paced by the broker (each record waits
    /// until it is stored).
    func load(every pace: Duration? = nil) -> Task<Void, Never> {
        Task { [producer, topic, partitions] in
            while !Task.isCancelled {
                for partition in 0..<partitions {
                    if pace != nil {
                        _ = try? producer.enqueue(topic: topic, key: nil, value: Array("tick".utf8), partition: partition)
                    } else {
                        _ = try? await producer.send(topic: topic, key: nil, value: Array("tick".utf8), partition: partition)
                    }
                }
                if let pace { try? await Task.sleep(for: pace) }
            }
        }
    }
}

/// When `record` was produced, in seconds since the Unix epoch.
private func producedAt(_ record: KafkaRecord) -> Double {
    Double(record.timestampMilliseconds ?? 0) / 1000
}
