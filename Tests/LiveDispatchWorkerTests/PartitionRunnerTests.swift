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
}
