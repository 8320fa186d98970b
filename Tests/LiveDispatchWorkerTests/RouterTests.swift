import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
@testable import LiveDispatchWorker
import Logging
import Synchronization
import TestSupport
import Testing

/// The router shell over fake Kafka ports (``FakeKafka``), in process:
/// assignments, revocations and lost partitions, back-pressure against the
/// dispatcher's backlog, the hand-over of a revoked partition to its next
/// owner, and a randomized run of moves under traffic.
@Suite("Router over fake Kafka ports", .serialized)
struct RouterTests {
    static let domain = "domain.events"
    static let commands = WorkerConfiguration().topic(.commands)
    static let group = WorkerConfiguration().kafka.groupID + ".router"
    static let rules = """
        version: 1
        activity_types:
          Counter:
            content_state:
              n: int
        rules:
          - name: count
            topic: \(domain)
            activity_id: "a-{{ event.id }}"
            activity_type: Counter
            set:
              n: event.n
        """

    /// A producer that writes to the fake cluster and remembers which
    /// domain record each command it wrote came from.
    final class RecordingProducer: ProducerPort {
        let inner: FakeProducer
        let sources = Mutex<[TopicPartition: [Int64]]>([:])

        init(kafka: FakeKafka) {
            inner = FakeProducer(kafka: kafka)
        }

        func enqueue(topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader]) throws(KafkaError) -> KafkaPendingDelivery {
            if topic == RouterTests.commands, let value,
               let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any],
               let source = object["source"] as? [String: Any], let from = source["topic"] as? String,
               let number = source["partition"] as? Int, let offset = source["offset"] as? Int {
                sources.withLock { $0[TopicPartition(topic: from, partition: Int32(number)), default: []].append(Int64(offset)) }
            }
            return try inner.enqueue(topic: topic, key: key, value: value, partition: partition, headers: headers)
        }

        /// The offsets of `partition` this router turned into commands, in order.
        func routed(_ partition: Int32) -> [Int64] {
            sources.withLock { $0[TopicPartition(topic: RouterTests.domain, partition: partition)] ?? [] }
        }
    }

    /// The dispatcher as the router sees it: a backlog the test sets.
    final class FakeDownstream: CommandsDownstream {
        let waiting = Atomic<Int>(0)
        let assignments = Atomic<Int>(0)
        let written = Mutex<[KafkaDeliveryReport]>([])

        var backlog: Int { waiting.load(ordering: .relaxed) }

        func set(_ count: Int) {
            waiting.store(count, ordering: .relaxed)
        }

        func routerAssigned() { assignments.add(1, ordering: .relaxed) }
        func commandWritten(_ report: KafkaDeliveryReport) { written.withLock { $0.append(report) } }
    }

    /// One router running over `kafka`, its group consumer, its hand-over
    /// reader and what it wrote.
    struct Running {
        let router: Router
        let producer: RecordingProducer
        let consumer: FakeConsumer
        let lingering: FakeConsumer
        let tasks: [Task<Void, any Error>]

        func stop() async {
            for task in tasks { task.cancel() }
            consumer.close()
            lingering.close()
            for task in tasks { _ = await task.result }
        }
    }

    static func ruleDirectory() throws -> URL {
        let directory = try TestPaths.temporaryDirectory("router-tests")
        try rules.write(to: directory.appendingPathComponent("count.yaml"), atomically: true, encoding: .utf8)
        return directory
    }

    static func start(
        _ kafka: FakeKafka, rules directory: URL, high: Int = 10_000, low: Int = 5_000, downstream: FakeDownstream? = nil
    ) throws -> Running {
        var configuration = WorkerConfiguration()
        configuration.rules.path = directory.path
        configuration.rules.reloadInterval = 0
        configuration.backpressure.highWatermark = high
        configuration.backpressure.lowWatermark = low
        let producer = RecordingProducer(kafka: kafka)
        let before = kafka.consumers.withLock { $0.count }
        let router = try Router(
            configuration: configuration, rules: try RuleSetStore(directory: directory.path),
            client: KafkaClientConfiguration(bootstrapServers: ["fake:9092"]), producer: producer, logger: Logger(label: "test"),
            metrics: WorkerMetrics(), downstream: downstream, kafka: kafka)
        let (consumer, lingering) = kafka.consumers.withLock { ($0[before], $0[before + 1]) }
        let tasks = [Task { try await router.run() }, Task { await router.runHandOver() }]
        return Running(router: router, producer: producer, consumer: consumer, lingering: lingering, tasks: tasks)
    }

    static func partitions(_ numbers: [Int32]) -> [TopicPartition] {
        numbers.map { TopicPartition(topic: domain, partition: $0) }
    }

    /// Appends an event to `partition` of the domain topic; returns its offset.
    @discardableResult
    static func event(_ kafka: FakeKafka, partition: Int32, id: Int, n: Int) -> Int64 {
        kafka.append(topic: domain, partition: partition, key: Array("\(id)".utf8), value: Array(#"{"id": \#(id), "n": \#(n)}"#.utf8))
    }

    @Test("an assigned partition is routed and its offsets stored; revoked, they are committed and it is routed on from where it stopped; lost, it is let go at once")
    func assignRevokeLost() async throws {
        let directory = try Self.ruleDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let kafka = FakeKafka(partitionCount: 2)
        for id in 0..<3 { Self.event(kafka, partition: 0, id: id, n: id) }
        for id in 0..<2 { Self.event(kafka, partition: 1, id: id, n: id) }
        let worker = try Self.start(kafka, rules: directory)
        worker.consumer.groupAssigns(Self.partitions([0, 1]))
        try await waitUntil("both partitions routed", timeout: .seconds(30)) {
            kafka.pump()
            return worker.producer.routed(0) == [0, 1, 2] && worker.producer.routed(1) == [0, 1]
        }
        #expect(worker.router.status.assigned == Self.partitions([0, 1]))
        try await waitUntil("the offsets stored", timeout: .seconds(30)) {
            worker.consumer.state.withLock { $0.stored } == [TopicPartition(topic: Self.domain, partition: 0): 3, TopicPartition(topic: Self.domain, partition: 1): 2]
        }

        await worker.consumer.groupRevokes(Self.partitions([0]))
        #expect(kafka.committed(Self.group, TopicPartition(topic: Self.domain, partition: 0)) == 3)
        try await waitUntil("partition 0 handed over", timeout: .seconds(30)) {
            worker.router.status.handingOver == Self.partitions([0]) && worker.router.status.assigned == Self.partitions([1])
        }
        Self.event(kafka, partition: 0, id: 3, n: 3)
        try await waitUntil("routed on after the revocation", timeout: .seconds(30)) {
            kafka.pump()
            return worker.producer.routed(0) == [0, 1, 2, 3]
        }
        #expect(kafka.committed(Self.group, TopicPartition(topic: Self.domain, partition: 0)) == 3, "what is routed during a hand-over is never committed")

        // Partition 1's offsets went with the revocation's commit; one more event is stored, not committed.
        #expect(kafka.committed(Self.group, TopicPartition(topic: Self.domain, partition: 1)) == 2)
        Self.event(kafka, partition: 1, id: 2, n: 2)
        try await waitUntil("partition 1's next event routed", timeout: .seconds(30)) {
            kafka.pump()
            return worker.producer.routed(1) == [0, 1, 2]
        }
        await worker.consumer.groupRevokes(Self.partitions([1]), lost: true)
        try await waitUntil("partition 1 let go", timeout: .seconds(30)) { worker.router.status.assigned.isEmpty }
        #expect(worker.router.status.handingOver == Self.partitions([0]), "a lost partition is not routed on")
        #expect(kafka.committed(Self.group, TopicPartition(topic: Self.domain, partition: 1)) == 2, "a lost partition commits nothing")
        Self.event(kafka, partition: 1, id: 9, n: 9)
        kafka.pump()
        #expect(worker.producer.routed(1) == [0, 1, 2])
        await worker.stop()
    }

    @Test("routing pauses while the dispatcher's backlog is over the high watermark and resumes once it falls below the low one")
    func backpressure() async throws {
        let directory = try Self.ruleDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let kafka = FakeKafka(partitionCount: 1)
        let downstream = FakeDownstream()
        let worker = try Self.start(kafka, rules: directory, high: 10, low: 5, downstream: downstream)
        worker.consumer.groupAssigns(Self.partitions([0]))
        Self.event(kafka, partition: 0, id: 0, n: 0)
        try await waitUntil("the first event routed", timeout: .seconds(30)) {
            kafka.pump()
            return worker.producer.routed(0) == [0]
        }
        #expect(downstream.assignments.load(ordering: .relaxed) == 1)
        #expect(downstream.written.withLock { $0.map(\.topic) } == [Self.commands], "told where its command landed")
        downstream.set(20)
        Self.event(kafka, partition: 0, id: 1, n: 1)
        try await waitUntil("routing paused", timeout: .seconds(30)) {
            kafka.pump()
            return worker.consumer.state.withLock { !$0.paused.isEmpty }
        }
        #expect(worker.producer.routed(0) == [0, 1])
        Self.event(kafka, partition: 0, id: 2, n: 2)
        kafka.pump()
        #expect(worker.producer.routed(0) == [0, 1], "nothing is read while paused")

        downstream.set(7)
        worker.router.downstreamMoved()
        kafka.pump()
        #expect(worker.consumer.state.withLock { !$0.paused.isEmpty }, "still paused above the low watermark")
        downstream.set(2)
        worker.router.downstreamMoved()
        try await waitUntil("routing resumed", timeout: .seconds(30)) {
            kafka.pump()
            return worker.producer.routed(0) == [0, 1, 2]
        }
        await worker.stop()
    }

    @Test("a revoked partition is routed on by its previous owner until the group's commit shows the next owner routes it, then let go")
    func handOver() async throws {
        let directory = try Self.ruleDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let kafka = FakeKafka(partitionCount: 1)
        let first = try Self.start(kafka, rules: directory)
        let second = try Self.start(kafka, rules: directory)
        first.consumer.groupAssigns(Self.partitions([0]))
        for id in 0..<2 { Self.event(kafka, partition: 0, id: id, n: id) }
        try await waitUntil("the first routes", timeout: .seconds(30)) {
            kafka.pump()
            return first.producer.routed(0) == [0, 1]
        }
        await first.consumer.groupRevokes(Self.partitions([0]))
        // Between the revocation and the next owner's assignment, nothing goes unrouted.
        Self.event(kafka, partition: 0, id: 2, n: 2)
        try await waitUntil("the first routes on", timeout: .seconds(30)) {
            kafka.pump()
            return first.producer.routed(0) == [0, 1, 2]
        }
        second.consumer.groupAssigns(Self.partitions([0]))
        try await waitUntil("the second routes from the commit", timeout: .seconds(30)) {
            kafka.pump()
            return second.producer.routed(0) == [2]
        }
        #expect(first.router.status.handingOver == Self.partitions([0]), "no commit of the new owner yet")
        try second.consumer.commitBlocking()
        try await waitUntil("the first lets go", timeout: .seconds(30)) { first.router.status.handingOver.isEmpty }
        Self.event(kafka, partition: 0, id: 3, n: 3)
        try await waitUntil("the second routes the next event", timeout: .seconds(30)) {
            kafka.pump()
            return second.producer.routed(0) == [2, 3]
        }
        #expect(first.producer.routed(0) == [0, 1, 2])
        await first.stop()
        await second.stop()
    }

    @Test("randomized moves of partitions between two routers under traffic: every event is routed, none twice by one owner's spell")
    func randomizedMoves() async throws {
        let directory = try Self.ruleDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let partitionCount: Int32 = 3
        let kafka = FakeKafka(partitionCount: Int(partitionCount))
        let workers = [try Self.start(kafka, rules: directory), try Self.start(kafka, rules: directory)]
        var random = SplitMix64(seed: UInt64(ProcessInfo.processInfo.environment["ROUTER_SEED"] ?? "") ?? 7)
        var owner: [Int32: Int] = [:]
        // How many times each worker was given each partition: the most
        // times it may route one event of it.
        var spells = [[Int32: Int]](repeating: [:], count: workers.count)
        for number in 0..<partitionCount {
            let chosen = Int(random.next() % 2)
            owner[number] = chosen
            spells[chosen][number, default: 0] += 1
            workers[chosen].consumer.groupAssigns(Self.partitions([number]))
        }
        var nextID = 0
        for _ in 0..<60 {
            switch random.next() % 6 {
            case 0, 1, 2:
                let number = Int32(random.next() % UInt64(partitionCount))
                Self.event(kafka, partition: number, id: nextID, n: nextID)
                nextID += 1
            case 3:
                let number = Int32(random.next() % UInt64(partitionCount))
                guard let from = owner[number] else { continue }
                let to = 1 - from
                await workers[from].consumer.groupRevokes(Self.partitions([number]), lost: random.next() % 5 == 0)
                workers[to].consumer.groupAssigns(Self.partitions([number]))
                owner[number] = to
                spells[to][number, default: 0] += 1
            case 4:
                for worker in workers { try worker.consumer.commitBlocking() }
            default:
                kafka.pump()
            }
        }
        // One more event per partition: its owner's commit past it ends the hand-overs of the others.
        for number in 0..<partitionCount {
            Self.event(kafka, partition: number, id: nextID, n: nextID)
            nextID += 1
        }
        try await waitUntil("every event routed", timeout: .seconds(60)) {
            kafka.pump()
            for worker in workers { try worker.consumer.commitBlocking() }
            return (0..<partitionCount).allSatisfy { number in
                let count = kafka.records(Self.domain, number).count
                let routed = Set(workers.flatMap { $0.producer.routed(number) })
                return routed == Set((0..<Int64(count)))
            }
        }
        for (index, worker) in workers.enumerated() {
            for number in 0..<partitionCount {
                var times: [Int64: Int] = [:]
                for offset in worker.producer.routed(number) { times[offset, default: 0] += 1 }
                let most = spells[index][number] ?? 0
                #expect(times.values.allSatisfy { $0 <= most }, "worker \(index) routed an event of partition \(number) more often than it was given it")
                #expect(worker.producer.routed(number).isEmpty || most > 0, "worker \(index) routed partition \(number) it never had")
            }
        }
        try await waitUntil("the hand-overs end", timeout: .seconds(60)) {
            for worker in workers { try worker.consumer.commitBlocking() }
            return workers.allSatisfy { $0.router.status.handingOver.isEmpty }
        }
        for worker in workers { await worker.stop() }
    }
}
