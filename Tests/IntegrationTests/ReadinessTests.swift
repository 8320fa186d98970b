import Foundation
import LiveDispatchCore
import Testing

/// What `/readyz` and `/status` say through a worker's life, against a real
/// broker: not ready until the worker joined and restored what it owns;
/// ready as a standby when there are more workers than partitions.
@Suite("Readiness", .serialized)
struct ReadinessTests {
    @Test("503 until joined and restored, then ready; a worker beyond the partition count is a ready standby")
    func phases() async throws {
        let stack = try await RealBrokerStack(partitions: 1)
        let ports = [try freePort(), try freePort()]
        let first = try stack.worker(configuration: try stack.writeConfiguration(group: "readiness", adminPort: ports[0]), record: stack.record("first"))
        // Every answer from the first one on, until the worker is ready.
        var seen: [WorkerReadiness] = []
        let ready = try await waitFor("the first worker to be ready", timeout: .seconds(60)) { () -> WorkerReadiness? in
            if !first.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(first.standardErrorLines.suffix(5))") }
            guard let observation = try WorkerReadiness.of(port: ports[0]) else { return nil }
            if seen.last != observation { seen.append(observation) }
            // /readyz and /status are two requests: wait until both say ready.
            return observation.phase == "ready" && observation.ready == 200 ? observation : nil
        }
        let before = try #require(seen.first)
        #expect(before.ready == 503 && ["joining", "restoring"].contains(before.phase), "the first answers were \(seen)")
        #expect(seen.filter { $0.phase != "ready" }.allSatisfy { $0.ready == 503 }, "ready before restored: \(seen)")
        #expect(ready == WorkerReadiness(ready: 200, phase: "ready", partitions: [0]))

        // A second worker for the one partition: one of the two owns it, the other stands by, and both are ready.
        let second = try stack.worker(configuration: try stack.writeConfiguration(group: "readiness", adminPort: ports[1]), record: stack.record("second"))
        let settled = try await waitFor("one owner and one standby", timeout: .seconds(60)) { () -> [WorkerReadiness]? in
            let observations = try ports.compactMap { try WorkerReadiness.of(port: $0) }
            guard observations.count == 2 else { return nil }
            let phases = Set(observations.map(\.phase))
            return phases == ["ready", "standby"] && observations.allSatisfy({ $0.ready == 200 }) ? observations : nil
        }
        let owner = try #require(settled.first { $0.phase == "ready" })
        let standby = try #require(settled.first { $0.phase == "standby" })
        #expect(owner == WorkerReadiness(ready: 200, phase: "ready", partitions: [0]))
        #expect(standby == WorkerReadiness(ready: 200, phase: "standby", partitions: []))
        // Each domain partition is routed by one of the two, and none is handed over once they settled.
        let routing = try await waitFor("each domain partition routed by one worker", timeout: .seconds(60)) { () -> [String: [Int]]? in
            var routed: [String: [Int]] = [:]
            for port in ports {
                guard let body = try adminGet(port: port, "/status")?.body, let status = try? JSONValue.parse(body),
                      let routing = status["routing"]?.objectValue, status["handing_over"]?.objectValue?.isEmpty == true
                else { return nil }
                for (topic, numbers) in routing {
                    routed[topic, default: []] += numbers.arrayValue?.compactMap { $0.integerValue.map(Int.init) } ?? []
                }
            }
            return !routed.isEmpty && routed.values.allSatisfy({ $0 == [0] }) ? routed : nil
        }
        #expect(routing.keys.contains("sports.scores"), "routed: \(routing)")
        #expect(try await second.stop() == 0)
        #expect(try await first.stop() == 0)
    }
}
