import Foundation
import Kafka
import Logging
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

        // The member lets go only once its broker thread has stopped
        // fetching: every partition paused for the rebalance and no fetch of
        // them in flight (librdkafka's fetch and msg debug logs tell). That
        // leaves the broker thread with nothing to fetch, as a member whose
        // hand-over work (a mark written, sends awaited) outlasts the fetch
        // in flight does.
        let watch = FetchWatch(topic: topic)
        var logger = Logger(label: "staying") { _ in FetchWatchHandler(watch: watch) }
        logger.logLevel = .debug
        var watched = configuration
        watched.client.properties["debug"] = "fetch,msg"
        let staying = try KafkaConsumer(
            configuration: watched, topics: [topic], logger: logger,
            onRevocation: { _, _ in watch.waitUntilIdle(seconds: 5) })
        // What the member read, when, and how long after each record was produced.
        let seen = Mutex<[(event: KafkaConsumerEvent, at: Double)]>([])
        let run = Task { try await staying.run() }
        let reader = Task {
            for await event in staying.events {
                let now = Date().timeIntervalSince1970
                seen.withLock { $0.append((event, now)) }
            }
        }
        let load = fixture.load()
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

        // A record of a partition this member kept through every rebalance
        // so far is read at once, whichever other partitions were moving:
        // what is read of the partitions it gave up is left out from their
        // first revocation on (got back, they resume where the other
        // member's commit left them and read a backlog first).
        var movedSince: [Int32: Double] = [:]
        var worst = 0.0
        var judged = 0
        for (event, at) in seen.withLock({ $0 }) {
            switch event {
            case .assigned:
                break
            case .revoked(let partitions, _):
                for partition in partitions where movedSince[partition.partition] == nil { movedSince[partition.partition] = at }
            case .record(let record):
                let produced = producedAt(record)
                guard produced > rebalances[0], at < movedSince[record.partition] ?? .infinity else { continue }
                judged += 1
                worst = max(worst, at - produced)
            }
        }
        #expect(rebalances.count >= 5)
        #expect(watch.waits.idle == watch.waits.all && watch.waits.all >= 2, "revocations that went on with a fetch in flight: \(watch.waits.all - watch.waits.idle) of \(watch.waits.all)")
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
        // Batches sent every 5 ms: a record waits that long for its batch,
        // which sets the load's pace (about 200 records a second).
        var producing = testProducerConfiguration(cluster: cluster)
        producing.linger = .milliseconds(5)
        producer = try KafkaProducer(configuration: producing, logger: testLogger())
    }

    func configuration(group: String) -> KafkaConsumerConfiguration {
        var configuration = fastConsumerConfiguration(cluster: cluster, group: group)
        configuration.client.properties["topic.metadata.refresh.interval.ms"] = "60000"
        configuration.client.properties["fetch.wait.max.ms"] = "10"
        return configuration
    }

    /// Writes one record to each partition after another until cancelled,
    /// each once the one before is stored: paced by the producer's batches
    /// and the broker.
    func load() -> Task<Void, Never> {
        Task { [producer, topic, partitions] in
            while !Task.isCancelled {
                for partition in 0..<partitions {
                    _ = try? await producer.send(topic: topic, key: nil, value: Array("tick".utf8), partition: partition)
                }
            }
        }
    }
}

/// What a consumer's broker thread does with each partition of a topic,
/// from librdkafka's `fetch` and `msg` debug logs (delivered on the thread
/// that logs): whether it fetches the partition, and whether a fetch of it
/// is in flight.
private final class FetchWatch: @unchecked Sendable {
    private let marker: String
    /// Guards everything below; signalled on every line about the topic.
    private let condition = NSCondition()
    private var fetchable: [Int32: Bool] = [:]
    /// The sequence number of the last fetch request and answer naming each partition.
    private var lastRequest: [Int32: Int] = [:]
    private var lastAnswer: [Int32: Int] = [:]
    private var lines = 0
    private var idleCount = 0
    private var waitCount = 0

    init(topic: String) { marker = "\(topic) [" }

    /// How many waits there were, and how many ended with the broker thread idle.
    var waits: (all: Int, idle: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (waitCount, idleCount)
    }

    func saw(_ line: String) {
        guard let range = line.range(of: marker),
              let partition = Int32(line[range.upperBound...].prefix { $0.isNumber })
        else { return }
        condition.lock()
        defer { condition.unlock() }
        lines += 1
        if line.contains("is not fetchable") {
            fetchable[partition] = false
        } else if line.contains("is fetchable") {
            fetchable[partition] = true
        } else if line.contains("Fetch topic") {
            lastRequest[partition] = lines
        } else if line.contains("MessageSet size") || line.contains("fetch response") {
            lastAnswer[partition] = lines
        }
        condition.broadcast()
    }

    /// Blocks the calling thread (the consumer's, serving a rebalance)
    /// until the broker thread fetches nothing and has no fetch in flight,
    /// or until `seconds` have passed.
    func waitUntilIdle(seconds: Double) {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        waitCount += 1
        while true {
            let idle = fetchable.values.allSatisfy { !$0 } && lastRequest.allSatisfy { $0.value < lastAnswer[$0.key, default: -1] }
            if idle {
                idleCount += 1
                return
            }
            guard condition.wait(until: deadline) else { return }
        }
    }
}

/// Hands a consumer's librdkafka log lines to a ``FetchWatch``; prints
/// warnings and errors as the other tests' loggers do.
private struct FetchWatchHandler: LogHandler {
    let watch: FetchWatch
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if let text = event.metadata?["kafka.log"] { watch.saw(text.description) }
        if event.level >= .warning {
            FileHandle.standardError.write(Data("\(event.level): \(event.message) \(event.metadata ?? [:])\n".utf8))
        }
    }
}

/// When `record` was produced, in seconds since the Unix epoch.
private func producedAt(_ record: KafkaRecord) -> Double {
    Double(record.timestampMilliseconds ?? 0) / 1000
}
