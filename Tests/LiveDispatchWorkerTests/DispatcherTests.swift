import Foundation
import Kafka
import LiveDispatchCore
@testable import LiveDispatchWorker
import Logging
import TestSupport
import Testing

/// The dispatcher shell over fake Kafka ports (``FakeKafka``), in process:
/// assignments, revocations with and without lingering, hand-overs between
/// two dispatchers of one group, and a randomized run of moves under
/// traffic.
@Suite("Dispatcher over fake Kafka ports", .serialized)
struct DispatcherTests {
    /// One dispatcher running over `kafka`, and what the test does to it.
    struct Running {
        let dispatcher: Dispatcher
        let task: Task<Void, any Error>
        let consumer: FakeConsumer

        func stop() async {
            task.cancel()
            consumer.close()
            _ = await task.result
        }
    }

    static func configuration(linger: Double, release: Double = 2) -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        configuration.shutdown.lingerTimeout = linger
        configuration.shutdown.releaseTimeout = release
        configuration.coalesce.window = 0
        return configuration
    }

    static func start(_ kafka: FakeKafka, linger: Double, release: Double = 2) throws -> Running {
        let configuration = configuration(linger: linger, release: release)
        let before = kafka.consumers.withLock { $0.count }
        let dispatcher = try Dispatcher(
            configuration: configuration, client: KafkaClientConfiguration(bootstrapServers: ["fake:9092"]), producer: FakeProducer(kafka: kafka),
            sender: PushSender(routes: [:], defaultApp: AppDirectory.defaultName), logger: Logger(label: "test"), metrics: WorkerMetrics(),
            publishesOutcomes: false, kafka: kafka)
        dispatcher.routerAssigned()
        let consumer = kafka.consumers.withLock { $0[before] }
        let task = Task { try await dispatcher.run() }
        return Running(dispatcher: dispatcher, task: task, consumer: consumer)
    }

    static let commands = WorkerConfiguration().topic(.commands)
    static let state = WorkerConfiguration().topic(.state)

    static func commands(_ numbers: [Int32]) -> [TopicPartition] {
        numbers.map { TopicPartition(topic: commands, partition: $0) }
    }

    /// Writes an update of `activity` setting `n`.
    static func command(_ kafka: FakeKafka, _ activity: String, n: Int) {
        let partition = Murmur2Partitioner.partition(forKey: activity, partitionCount: kafka.partitionCount)
        let value = #"{"activity_id": "\#(activity)", "content_state": {"n": \#(n)}}"#
        kafka.append(topic: commands, partition: partition, key: Array(activity.utf8), value: Array(value.utf8))
    }

    /// The `n` of the activity's last snapshot in `state`.
    static func lastN(_ kafka: FakeKafka, _ activity: String) -> Int? {
        let partition = Murmur2Partitioner.partition(forKey: activity, partitionCount: kafka.partitionCount)
        guard let value = kafka.records(state, partition).last(where: { $0.key == Array(activity.utf8) })?.value,
              let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any],
              let content = object["content_state"] as? [String: Any]
        else { return nil }
        return content["n"] as? Int
    }

    /// The partitions a dispatcher may push for: owned or lingering.
    static func pushing(_ dispatcher: Dispatcher) -> Set<Int32> {
        let status = dispatcher.status
        return Set(status.owned + status.lingering)
    }

    @Test("an assigned partition is taken, restored and dispatched; revoked without lingering it is released with its offsets committed")
    func assignDispatchRevoke() async throws {
        let kafka = FakeKafka(partitionCount: 2)
        let worker = try Self.start(kafka, linger: 0)
        worker.consumer.groupAssigns(Self.commands([0, 1]))
        try await waitUntil("both partitions owned", timeout: .seconds(60)) {
            kafka.pump()
            return worker.dispatcher.status.owned == [0, 1] && worker.dispatcher.phase == .ready
        }
        for n in 1...3 { Self.command(kafka, "match-1", n: n) }
        try await waitUntil("the last state written", timeout: .seconds(60)) {
            kafka.pump()
            return Self.lastN(kafka, "match-1") == 3
        }
        let partition = Murmur2Partitioner.partition(forKey: "match-1", partitionCount: 2)
        await worker.consumer.groupRevokes(Self.commands([partition]))
        #expect(worker.dispatcher.status.partitions == [1 - partition], "released before the revocation returned")
        #expect(kafka.committed(WorkerConfiguration().kafka.groupID, TopicPartition(topic: Self.commands, partition: partition)) == 3)
        await worker.stop()
    }

    @Test("a partition revoked by a rebalance lingers until the next owner claims it; the new owner restores only after the release, and both never push it at once")
    func handOverBetweenTwoDispatchers() async throws {
        let kafka = FakeKafka(partitionCount: 1)
        let first = try Self.start(kafka, linger: 10)
        let second = try Self.start(kafka, linger: 10)
        first.consumer.groupAssigns(Self.commands([0]))
        try await waitUntil("the first owns the partition", timeout: .seconds(60)) {
            kafka.pump()
            return first.dispatcher.status.owned == [0]
        }
        Self.command(kafka, "match-1", n: 1)
        await first.consumer.groupRevokes(Self.commands([0]))
        #expect(first.dispatcher.status.lingering == [0])
        Self.command(kafka, "match-1", n: 2)
        second.consumer.groupAssigns(Self.commands([0]))
        var overlaps = 0
        try await waitUntil("the second owns the partition", timeout: .seconds(60)) {
            kafka.pump()
            if !Self.pushing(first.dispatcher).isDisjoint(with: Self.pushing(second.dispatcher)) { overlaps += 1 }
            return second.dispatcher.status.owned == [0]
        }
        #expect(overlaps == 0)
        #expect(first.dispatcher.status.partitions.isEmpty, "the first let go once claimed, well before its linger deadline")
        Self.command(kafka, "match-1", n: 3)
        try await waitUntil("the new owner dispatches", timeout: .seconds(60)) {
            kafka.pump()
            return Self.lastN(kafka, "match-1") == 3
        }
        await first.stop()
        await second.stop()
    }

    @Test("a lost assignment is let go at once and commits nothing; the stage is joining until the group assigns it again")
    func lostAssignment() async throws {
        let kafka = FakeKafka(partitionCount: 1)
        let worker = try Self.start(kafka, linger: 10)
        worker.consumer.groupAssigns(Self.commands([0]))
        try await waitUntil("the partition owned", timeout: .seconds(60)) {
            kafka.pump()
            return worker.dispatcher.status.owned == [0]
        }
        Self.command(kafka, "match-1", n: 1)
        try await waitUntil("the state written", timeout: .seconds(60)) {
            kafka.pump()
            return Self.lastN(kafka, "match-1") == 1
        }
        await worker.consumer.groupRevokes(Self.commands([0]), lost: true)
        #expect(worker.dispatcher.status.partitions.isEmpty, "no lingering: another member may own it already")
        #expect(worker.dispatcher.phase == .joining)
        #expect(kafka.committed(WorkerConfiguration().kafka.groupID, TopicPartition(topic: Self.commands, partition: 0)) == nil)
        await worker.stop()
    }

    @Test("the backlog is one load of what was last measured: it moves when commands are taken in, when the router's write is acknowledged and when the partition is let go, not when it is read")
    func backlogMirror() async throws {
        let kafka = FakeKafka(partitionCount: 1)
        let worker = try Self.start(kafka, linger: 0)
        worker.consumer.groupAssigns(Self.commands([0]))
        try await waitUntil("the partition owned", timeout: .seconds(60)) {
            kafka.pump()
            return worker.dispatcher.status.owned == [0] && worker.dispatcher.phase == .ready
        }
        Self.command(kafka, "match-1", n: 1)
        try await waitUntil("the first state written", timeout: .seconds(60)) {
            kafka.pump()
            return Self.lastN(kafka, "match-1") == 1
        }
        #expect(worker.dispatcher.backlog == 0)
        // Two more in the log, not fetched: reading the backlog asks no broker.
        Self.command(kafka, "match-1", n: 2)
        Self.command(kafka, "match-1", n: 3)
        #expect(worker.dispatcher.backlog == 0, "not measured when read")
        worker.dispatcher.commandWritten(KafkaDeliveryReport(topic: Self.commands, partition: 0, offset: 2))
        #expect(worker.dispatcher.backlog == 2, "the router's write moves the partition's written end")
        try await waitUntil("the last state written", timeout: .seconds(60)) {
            kafka.pump()
            return Self.lastN(kafka, "match-1") == 3
        }
        #expect(worker.dispatcher.backlog == 0, "every command taken in")
        worker.dispatcher.commandWritten(KafkaDeliveryReport(topic: Self.commands, partition: 0, offset: 4))
        #expect(worker.dispatcher.backlog == 2)
        await worker.consumer.groupRevokes(Self.commands([0]))
        #expect(worker.dispatcher.backlog == 0, "a partition let go counts nothing")
        await worker.stop()
    }

    @Test("a lingering partition nobody claims stops at its deadline, is released and marked released")
    func lingerDeadline() async throws {
        let kafka = FakeKafka(partitionCount: 1)
        let worker = try Self.start(kafka, linger: 0.5)
        worker.consumer.groupAssigns(Self.commands([0]))
        try await waitUntil("the partition owned", timeout: .seconds(60)) {
            kafka.pump()
            return worker.dispatcher.status.owned == [0]
        }
        await worker.consumer.groupRevokes(Self.commands([0]))
        #expect(worker.dispatcher.status.lingering == [0])
        let marks = PartitionFollower.group(WorkerConfiguration().kafka.groupID)
        let partition = TopicPartition(topic: Self.commands, partition: 0)
        #expect(kafka.committed(marks, partition).map { HandOverMark(offset: $0).until != nil } == true, "marked lingering, with its deadline")
        // Nothing but the timer armed at the machine's deadline ends the linger.
        try await waitUntil("the linger's end", timeout: .seconds(60)) { worker.dispatcher.status.partitions.isEmpty }
        #expect(kafka.committed(marks, partition).map { HandOverMark(offset: $0) } == .released)
        await worker.stop()
    }

    @Test("randomized moves between two dispatchers under traffic: never two pushers of a partition, and every activity ends at its last command", arguments: 0..<3)
    func randomizedMoves(seed: UInt64) async throws {
        var generator = SplitMix64(seed: seed &+ 17)
        let kafka = FakeKafka(partitionCount: 3)
        // A release that outlasts any stall of a loaded machine: past it a new
        // owner takes the partition by design, which this test would count as two pushers.
        let workers = [try Self.start(kafka, linger: 5, release: 60), try Self.start(kafka, linger: 5, release: 60)]
        var owner: [Int32: Int] = [:]
        for number: Int32 in 0..<3 {
            owner[number] = generator.below(2)
            workers[owner[number] ?? 0].consumer.groupAssigns(Self.commands([number]))
        }
        let activities = (0..<6).map { "match-\($0)" }
        var last: [String: Int] = [:]
        var overlaps: [String] = []
        func check() {
            kafka.pump()
            let pushing = workers.map { Self.pushing($0.dispatcher) }
            if !pushing[0].isDisjoint(with: pushing[1]) { overlaps.append("\(pushing[0].intersection(pushing[1]).sorted()) \(workers.map { $0.dispatcher.status })") }
        }
        for step in 0..<12 {
            for _ in 0..<5 {
                let activity = activities[generator.below(activities.count)]
                last[activity, default: 0] += 1
                Self.command(kafka, activity, n: last[activity, default: 0])
            }
            check()
            // Move one partition: revoked from its owner, then assigned to either worker.
            let number = Int32(generator.below(3))
            if let from = owner[number] {
                await workers[from].consumer.groupRevokes(Self.commands([number]))
                check()
                let to = generator.below(2)
                owner[number] = to
                workers[to].consumer.groupAssigns(Self.commands([number]))
            }
            try await waitUntil("step \(step): every partition owned by its assignee", timeout: .seconds(60)) {
                check()
                return owner.allSatisfy { workers[$0.value].dispatcher.status.owned.contains($0.key) }
            }
        }
        try await waitUntil("every activity's last command in its state", timeout: .seconds(60)) {
            check()
            return last.allSatisfy { Self.lastN(kafka, $0.key) == $0.value }
        }
        #expect(overlaps.isEmpty, "seed \(seed): two pushers of \(overlaps)")
        for worker in workers { await worker.stop() }
    }
}
