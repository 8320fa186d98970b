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
        let produced = Mutex<[PartitionDispatcher.Produce]>([])
        let services = DispatchServices(
            clock: { UnixTime(seconds: started + (Date().timeIntervalSince1970 - started) / 2) },
            jitter: { 0.5 },
            sender: PushSender(routes: [:], defaultApp: AppDirectory.defaultName),
            channels: { _, _ in },
            enqueue: { produce, _ in
                produced.withLock { $0.append(produce) }
                // Never acknowledged: the snapshot being written is what this test waits for.
                return .failure(KafkaError(code: .produce, message: "not stored in this test", isRetryable: true))
            },
            commit: { _, _, _ in },
            observe: { _ in },
            pushSent: { _, _, _ in },
            writeFailed: { _, _, _ in },
            countOutstanding: { $0 },
            outstandingMoved: { _ in })
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0.2
        let runner = PartitionRunner(number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), services: services)
        defer { runner.close() }
        #expect(runner.finishRestore())
        let command = Array(#"{"activity_id": "match-7", "content_state": {"teamOneScore": 1}}"#.utf8)
        runner.apply { machine, now in
            machine.command(.init(offset: 0, key: Array("match-7".utf8), value: command, timestamp: now), now: now)
        }
        #expect(produced.withLock { $0.isEmpty }, "held for its window")
        let snapshot = try await waitFor("the flush's snapshot", timeout: .seconds(10)) {
            produced.withLock { $0.first { $0.topic == .state } }
        }
        #expect(snapshot.key == "match-7")
    }

    /// Services whose writes Kafka refuses for now while `refusing` is
    /// `.retryable`, and for good once it is `.permanent` (which
    /// acknowledges them); `changed` counts the runner's signals.
    final class Refusing: Sendable {
        enum Refusal { case retryable, permanent }
        let refusal = Mutex(Refusal.retryable)
        let produced = Mutex<[PartitionDispatcher.Produce]>([])
        let changed = Mutex(0)
        let reportsIdle = Atomic(false)

        func services() -> DispatchServices {
            DispatchServices(
                clock: { UnixTime(seconds: Date().timeIntervalSince1970) }, jitter: { 0.5 },
                sender: PushSender(routes: [:], defaultApp: AppDirectory.defaultName),
                channels: { _, _ in },
                enqueue: { [self] produce, _ in
                    produced.withLock { $0.append(produce) }
                    let permanent = refusal.withLock { $0 == .permanent }
                    return .failure(KafkaError(code: .produce, message: "refused in this test", isRetryable: !permanent, isPermanent: permanent))
                },
                commit: { _, _, _ in }, observe: { _ in }, pushSent: { _, _, _ in }, writeFailed: { _, _, _ in },
                countOutstanding: { $0 }, outstandingMoved: { _ in },
                changed: { [self] in changed.withLock { $0 += 1 } },
                reportsIdle: { [self] in reportsIdle.load(ordering: .relaxed) })
        }
    }

    /// Applies one command with a window of 0 and waits for its snapshot's write.
    func writeOneSnapshot(_ runner: PartitionRunner, _ kafka: Refusing) async throws {
        #expect(runner.finishRestore())
        let command = Array(#"{"activity_id": "match-7", "content_state": {"teamOneScore": 1}}"#.utf8)
        runner.apply { machine, now in
            machine.command(.init(offset: 0, key: Array("match-7".utf8), value: command, timestamp: now), now: now)
        }
        _ = try await waitFor("the snapshot's write", timeout: .seconds(10)) { kafka.produced.withLock { $0.first { $0.topic == .state } } }
    }

    @Test("a revoked partition signals when its last write under way is answered, so its release goes on without polling")
    func quiescedRunnerSignalsWhenSettled() async throws {
        let kafka = Refusing()
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0
        let runner = PartitionRunner(
            number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), services: kafka.services())
        defer { runner.close() }
        try await writeOneSnapshot(runner, kafka)
        #expect(!runner.isSettled, "the snapshot's write waits for Kafka")
        #expect(kafka.changed.withLock { $0 } == 0, "not revoked, not draining: nothing to tell")
        runner.quiesce()
        kafka.refusal.withLock { $0 = .permanent }
        // The write's retry is refused for good, which answers it.
        _ = try await waitFor("the signal", timeout: .seconds(10)) { kafka.changed.withLock { $0 } > 0 ? true : nil }
        #expect(runner.isSettled)
    }

    @Test("while the dispatcher drains, an input that leaves the partition idle signals; before, none does")
    func idleRunnerSignalsWhileDraining() async throws {
        let kafka = Refusing()
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = 0
        let runner = PartitionRunner(
            number: 0, configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), services: kafka.services())
        defer { runner.close() }
        try await writeOneSnapshot(runner, kafka)
        #expect(!runner.isIdle)
        kafka.reportsIdle.store(true, ordering: .relaxed)
        kafka.refusal.withLock { $0 = .permanent }
        _ = try await waitFor("the signal", timeout: .seconds(10)) { kafka.changed.withLock { $0 } > 0 ? true : nil }
        #expect(runner.isIdle)
    }
}
