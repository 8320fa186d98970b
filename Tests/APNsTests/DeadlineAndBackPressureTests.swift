import Foundation
import Logging
import MetricsTestKit
import Synchronization
import Testing
@testable import APNs

/// Against a TLS server that completes the handshake and then never answers.
@Suite("Deadlines and back-pressure")
struct DeadlineAndBackPressureTests {
    func makePool(
        _ server: SilentTLSServer, maxQueued: Int, requestTimeout: Double, idlePingInterval: Double = 600,
        pingTimeout: Double = 10, metrics: TestMetrics = TestMetrics()
    ) throws -> APNsConnectionPool {
        let configuration = APNsClientConfiguration(
            endpoint: .init(host: "127.0.0.1", port: server.port, serverName: "localhost"), connections: 1,
            maxQueued: maxQueued, requestTimeout: requestTimeout, idlePingInterval: idlePingInterval,
            pingTimeout: pingTimeout, additionalTrustRoots: try server.certificate.trustRoots())
        return try APNsConnectionPool(
            configuration: configuration, signingKey: testKey,
            logger: Logger(label: "apns-tests") { _ in SwiftLogNoOpLogHandler() }, metricsFactory: metrics)
    }

    @Test func anUnansweredPingClosesTheConnectionAndThePoolReconnects() async throws {
        let server = try SilentTLSServer()
        let metrics = TestMetrics()
        let pool = try makePool(server, maxQueued: 10, requestTimeout: 5, idlePingInterval: 1, pingTimeout: 1, metrics: metrics)
        let reconnected = await eventually(timeout: 60) {
            let pings = (try? metrics.expectCounter("apns_pings_total").totalValue) ?? 0
            let attempts = (try? metrics.expectCounter("apns_connection_attempts_total").totalValue) ?? 0
            return pings >= 1 && attempts >= 2
        }
        #expect(reconnected)
        await pool.shutdown()
        try await server.close()
    }

    @Test func theGaugesAreRecordedWhenAskedAsThePoolStandsThen() async throws {
        let server = try SilentTLSServer()
        let metrics = TestMetrics()
        let pool = try makePool(server, maxQueued: 10, requestTimeout: 3, metrics: metrics)
        let requests = try (0..<3).map { try testRequest(token: hexToken($0)) }
        let sending = Task { await pool.send(requests) }
        // One connection without a success carries one stream; the others queue.
        #expect(await eventually { pool.statistics.inFlight == 1 && pool.statistics.queued == 2 })
        pool.recordGauges()
        #expect(try metrics.expectGauge("apns_streams_in_flight").lastValue == 1)
        #expect(try metrics.expectGauge("apns_requests_queued").lastValue == 2)
        #expect(try metrics.expectGauge("apns_connections", [("state", "ready")]).lastValue == 1)
        await pool.shutdown()
        _ = await sending.value
        pool.recordGauges()
        #expect(try metrics.expectGauge("apns_streams_in_flight").lastValue == 0)
        #expect(try metrics.expectGauge("apns_requests_queued").lastValue == 0)
        try await server.close()
    }

    @Test func aRequestWithoutAnswerEndsAtItsDeadline() async throws {
        let server = try SilentTLSServer()
        let pool = try makePool(server, maxQueued: 10, requestTimeout: 1)
        let outcome = await pool.send(try testRequest(token: hexToken(1)))
        guard case .retryable(let failure) = outcome else {
            Issue.record("expected a retryable timeout, got \(outcome)")
            return
        }
        #expect(failure.error.code == .timeout)
        #expect(failure.status == nil)
        #expect(pool.statistics.inFlight == 0)
        await pool.shutdown()
        try await server.close()
    }

    @Test func aFullQueueMakesCallersWaitInsteadOfGrowing() async throws {
        let server = try SilentTLSServer()
        // One connection without a success carries one stream; two more may
        // queue; every other caller waits in `send`.
        let pool = try makePool(server, maxQueued: 2, requestTimeout: 8)
        let callers = 12
        let finished = Tally()
        let peakQueued = Tally()
        try await withThrowingTaskGroup(of: APNsOutcome.self) { group in
            for index in 0..<callers {
                let request = try testRequest(token: hexToken(index))
                group.addTask {
                    let outcome = await pool.send(request)
                    finished.increment()
                    return outcome
                }
            }
            let allWaiting = await eventually {
                let statistics = pool.statistics
                peakQueued.raise(to: statistics.queued)
                return statistics.inFlight == 1 && statistics.queued == 2 && statistics.waiting == callers - 3
            }
            #expect(allWaiting)
            #expect(finished.value == 0)
            #expect(peakQueued.value <= 2)
            // Shutting down resolves every caller, each exactly once.
            await pool.shutdown()
            var outcomes: [APNsOutcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            #expect(outcomes.count == callers)
            #expect(outcomes.allSatisfy { if case .retryable = $0 { true } else { false } })
        }
        #expect(finished.value == callers)
        try await server.close()
    }

    @Test func aCancelledCallerGetsARetryableOutcomeAndFreesItsStream() async throws {
        let server = try SilentTLSServer()
        let pool = try makePool(server, maxQueued: 10, requestTimeout: 60)
        let request = try testRequest(token: hexToken(1))
        let task = Task { await pool.send(request) }
        #expect(await eventually { pool.statistics.inFlight == 1 })
        task.cancel()
        let outcome = await task.value
        guard case .retryable(let failure) = outcome else {
            Issue.record("expected retryable, got \(outcome)")
            return
        }
        #expect(failure.error.code == .cancelled)
        #expect(pool.statistics.inFlight == 0)
        await pool.shutdown()
        try await server.close()
    }

    @Test func aBatchLargerThanTheQueueWaitsAndEndsAtItsDeadline() async throws {
        let server = try SilentTLSServer()
        let pool = try makePool(server, maxQueued: 3, requestTimeout: 2)
        let requests = try (0..<10).map { try testRequest(token: hexToken($0)) }
        let outcomes = await pool.send(requests)
        #expect(outcomes.count == 10)
        for outcome in outcomes {
            guard case .retryable(let failure) = outcome else {
                Issue.record("expected a timeout, got \(outcome)")
                continue
            }
            #expect(failure.error.code == .timeout)
        }
        #expect(pool.statistics.queued == 0)
        #expect(pool.statistics.waiting == 0)
        await pool.shutdown()
        try await server.close()
    }
}
