import Foundation
import Kafka
@testable import LiveDispatchCore
@testable import LiveDispatchWorker
import NIOPosix
import Synchronization
import TestSupport
import Testing

@Suite("PartitionRunner")
struct PartitionRunnerTests {
    /// The event loop's timers run on the monotonic clock, the machine on
    /// the wall clock it is given. Here that clock runs at half speed, so
    /// every timer fires while the machine still sees its deadline ahead:
    /// the runner must arm again and flush once the deadline is reached.
    @Test("a timer that fires before the machine's clock reaches its deadline is armed again, and the flush happens")
    func timerBeforeItsDeadline() async throws {
        let started = Date().timeIntervalSince1970
        // Never acknowledged: the snapshot being written is what this test waits for.
        let port = FakePartitionPort(clock: { UnixTime(seconds: started + (Date().timeIntervalSince1970 - started) / 2) })
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0.2
        let runner = PartitionRunner(number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), port: port)
        defer { runner.close() }
        #expect(runner.finishRestore() == false)
        let command = Array(#"{"activity_id": "match-7", "content_state": {"teamOneScore": 1}}"#.utf8)
        runner.apply { machine, now in
            machine.command(.init(offset: 0, key: Array("match-7".utf8), value: command, timestamp: now), now: now)
        }
        #expect(port.produced.withLock { $0.isEmpty }, "held for its window")
        let snapshot = try await waitFor("the flush's snapshot", timeout: .seconds(10)) {
            port.produced.withLock { $0.first { $0.topic == .state } }
        }
        #expect(snapshot.key == "match-7")
    }

    /// Applies one command with a window of 0 and waits for its snapshot's write.
    func writeOneSnapshot(_ runner: PartitionRunner, _ kafka: FakePartitionPort) async throws {
        #expect(runner.finishRestore() == false)
        let command = Array(#"{"activity_id": "match-7", "content_state": {"teamOneScore": 1}}"#.utf8)
        runner.apply { machine, now in
            machine.command(.init(offset: 0, key: Array("match-7".utf8), value: command, timestamp: now), now: now)
        }
        _ = try await waitFor("the snapshot's write", timeout: .seconds(10)) { kafka.produced.withLock { $0.first { $0.topic == .state } } }
    }

    @Test("a revoked partition signals when its last write under way is answered, so its release goes on without polling")
    func quiescedRunnerSignalsWhenSettled() async throws {
        let kafka = FakePartitionPort()
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0
        let runner = PartitionRunner(
            number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), port: kafka)
        defer { runner.close() }
        try await writeOneSnapshot(runner, kafka)
        #expect(!runner.isSettled, "the snapshot's write waits for Kafka")
        #expect(kafka.signals.withLock { $0 } == 0, "not revoked, not draining: nothing to tell")
        runner.quiesce()
        kafka.refusal.withLock { $0 = .permanent }
        // The write's retry is refused for good, which answers it.
        _ = try await waitFor("the signal", timeout: .seconds(10)) { kafka.signals.withLock { $0 } > 0 ? true : nil }
        #expect(runner.isSettled)
    }

    @Test("while the dispatcher drains, an input that leaves the partition idle signals; before, none does")
    func idleRunnerSignalsWhileDraining() async throws {
        let kafka = FakePartitionPort()
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0
        let runner = PartitionRunner(
            number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), port: kafka)
        defer { runner.close() }
        try await writeOneSnapshot(runner, kafka)
        #expect(!runner.isIdle)
        kafka.idleReports.store(true, ordering: .relaxed)
        kafka.refusal.withLock { $0 = .permanent }
        _ = try await waitFor("the signal", timeout: .seconds(10)) { kafka.signals.withLock { $0 } > 0 ? true : nil }
        #expect(runner.isIdle)
    }
}

/// The runner's port: writes Kafka refuses (for now while `refusal` is
/// `.retryable`, for good once `.permanent`, which acknowledges them),
/// nothing else done; `signals` counts what the runner tells the stage to
/// look at again (settled, idle).
final class FakePartitionPort: PartitionPort {
    enum Refusal { case retryable, permanent }
    let refusal = Mutex(Refusal.retryable)
    let produced = Mutex<[PartitionDispatcher.Produce]>([])
    let signals = Mutex(0)
    let idleReports = Atomic(false)
    let demands = Mutex<[SendLimitShares.Demand]>([])
    let clock: @Sendable () -> UnixTime
    let sender = PushSender(routes: [:], defaultApp: AppDirectory.defaultName)

    init(clock: @escaping @Sendable () -> UnixTime = { UnixTime(seconds: Date().timeIntervalSince1970) }) {
        self.clock = clock
    }

    var now: UnixTime { clock() }
    func jitter() -> Double { 0.5 }
    func channel(_ request: PartitionDispatcher.ChannelRequest, done: @escaping @Sendable (BroadcastChannels.Report) -> Void) {}
    func enqueue(_ produce: PartitionDispatcher.Produce, partition: Int32) -> Result<KafkaPendingDelivery, KafkaError> {
        produced.withLock { $0.append(produce) }
        let permanent = refusal.withLock { $0 == .permanent }
        return .failure(KafkaError(code: .produce, message: "refused in this test", isRetryable: !permanent, isPermanent: permanent))
    }
    func commit(_ topic: InternalTopic, partition: Int32, offset: Int64) {}
    func observe(_ observation: PartitionDispatcher.Observation) {}
    func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double) {}
    func writeFailed(_ produce: PartitionDispatcher.Produce, _ error: KafkaError, attempt: Int) {}
    func writeTraced(_ produce: PartitionDispatcher.Produce, _ report: KafkaDeliveryReport, started: UnixTime, ended: UnixTime) {}
    func countOutstanding(_ delta: Int) -> Int { delta }
    func outstandingMoved(_ total: Int) {}
    func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand) { demands.withLock { $0.append(demand) } }
    func caughtUp(_ number: Int32) {}
    func settled(_ number: Int32) { signals.withLock { $0 += 1 } }
    func changed() { signals.withLock { $0 += 1 } }
    var reportsIdle: Bool { idleReports.load(ordering: .relaxed) }
}
