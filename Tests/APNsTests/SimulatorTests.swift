import APNsSimulator
import Crypto
import Foundation
import LiveDispatchCore
import Logging
import MetricsTestKit
import NIOSSL
import Synchronization
import Testing
@testable import APNs

/// The client against the APNs simulator over TLS.
@Suite("Client against the APNs simulator")
struct SimulatorTests {
    static let bundleID = "com.example.app"

    /// A running simulator for `testKey`, with the faults given.
    func startSimulator(
        faults: SimulatorFaults = SimulatorFaults(), maxConcurrentStreams: Int = 1000,
        clock: (@Sendable () -> Double)? = nil
    ) async throws -> APNsSimulator {
        var configuration = APNsSimulator.Configuration(
            teamID: testKey.teamID, keyID: testKey.keyID, publicKey: testKey.privateKey.publicKey,
            bundleID: Self.bundleID, maxConcurrentStreams: maxConcurrentStreams, faults: faults, threads: 1)
        if let clock { configuration.clock = clock }
        return try await APNsSimulator.start(configuration: configuration, logger: Logger(label: "simulator") { _ in SwiftLogNoOpLogHandler() })
    }

    func makePool(
        _ simulator: APNsSimulator, key: APNsSigningKey = testKey, connections: Int = 2, requestTimeout: Double = 30,
        idlePingInterval: Double = 600, clock: any APNsClock = SystemAPNsClock(), metrics: TestMetrics = TestMetrics()
    ) throws -> APNsConnectionPool {
        let roots = try NIOSSLCertificate.fromPEMBytes(Array(simulator.certificate.certificatePEM.utf8))
        let configuration = APNsClientConfiguration(
            endpoint: .init(host: "127.0.0.1", port: simulator.port, serverName: "localhost"),
            connections: connections, requestTimeout: requestTimeout, idlePingInterval: idlePingInterval,
            additionalTrustRoots: roots)
        return try APNsConnectionPool(
            configuration: configuration, signingKey: key, clock: clock,
            logger: Logger(label: "apns-tests") { _ in SwiftLogNoOpLogHandler() }, metricsFactory: metrics)
    }

    /// Sends one request per token at once and returns the outcomes by token.
    func burst(_ pool: APNsConnectionPool, tokens: [String]) async throws -> [String: APNsOutcome] {
        try await withThrowingTaskGroup(of: (String, APNsOutcome).self) { group in
            for token in tokens {
                let request = try testRequest(token: token)
                group.addTask { (token, await pool.send(request)) }
            }
            var outcomes: [String: APNsOutcome] = [:]
            for try await (token, outcome) in group {
                #expect(outcomes[token] == nil, "token \(token) resolved twice")
                outcomes[token] = outcome
            }
            return outcomes
        }
    }

    func isDelivered(_ outcome: APNsOutcome?) -> Bool {
        if case .delivered = outcome { return true }
        return false
    }

    @Test func eachOutcomeClass() async throws {
        let gone = hexToken(0x410)
        let simulator = try await startSimulator(faults: SimulatorFaults(unregisteredTokens: [gone: 1_764_000_000_000]))
        let pool = try makePool(simulator)

        let request = try testRequest(token: hexToken(1))
        #expect(await pool.send(request) == .delivered(apnsID: request.apnsID))

        #expect(await pool.send(try testRequest(token: gone)) == .tokenInvalid(reason: .unregistered, since: UnixTime(seconds: 1_764_000_000)))

        let large = try testRequest(token: hexToken(2), payload: #"{"aps":{"event":"update","timestamp":1,"content-state":{"x":""# + String(repeating: "a", count: 5000) + #""}}}"#)
        #expect(await pool.send(large) == .permanent(status: 413, reason: .payloadTooLarge))

        try simulator.setFaults(SimulatorFaults(errorSchedule: [503]))
        let unavailable = await pool.send(try testRequest(token: hexToken(3)))
        guard case .retryable(let failure) = unavailable else {
            Issue.record("expected retryable, got \(unavailable)")
            return
        }
        #expect(failure.status == 503)
        try simulator.setFaults(SimulatorFaults(errorSchedule: [429]))
        guard case .retryable(let throttled) = await pool.send(try testRequest(token: hexToken(4))) else {
            Issue.record("429 is not retryable")
            return
        }
        #expect(throttled.status == 429)
        try simulator.setFaults(SimulatorFaults())
        await pool.shutdown()

        // A key the server does not know: a configuration error, reported loudly.
        let stranger = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: testKey.keyID, teamID: testKey.teamID)
        let misconfigured = try makePool(simulator, key: stranger, connections: 1)
        let rejected = await misconfigured.send(try testRequest(token: hexToken(5)))
        guard case .misconfigured(let error) = rejected else {
            Issue.record("expected misconfigured, got \(rejected)")
            return
        }
        #expect(error.code == .providerTokenRejected)
        await misconfigured.shutdown()
        try await simulator.stop()
    }

    @Test func goawayInTheMiddleOfABurstLosesNothing() async throws {
        let simulator = try await startSimulator(faults: SimulatorFaults(goAwayAfterStreams: 60))
        let metrics = TestMetrics()
        let pool = try makePool(simulator, metrics: metrics)
        let tokens = (0..<600).map { hexToken(0x1000 + $0) }
        let outcomes = try await burst(pool, tokens: tokens)
        #expect(outcomes.count == tokens.count)
        let undelivered = outcomes.values.filter { !isDelivered($0) }
        #expect(undelivered.isEmpty, "\(undelivered.count) not delivered, first: \(String(describing: undelivered.first))")
        // Each push reached the server exactly once.
        for token in tokens { #expect(simulator.received(by: token)?.count == 1) }
        #expect(simulator.connections.count > 2)
        #expect(try metrics.expectCounter("apns_resends_total").totalValue > 0)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func connectionResetsResolveEveryRequestExactlyOnce() async throws {
        let simulator = try await startSimulator(faults: SimulatorFaults(resetConnectionAfterRequests: 80))
        let metrics = TestMetrics()
        let pool = try makePool(simulator, metrics: metrics)
        let tokens = (0..<500).map { hexToken(0x2000 + $0) }
        let outcomes = try await burst(pool, tokens: tokens)
        #expect(outcomes.count == tokens.count)
        var delivered = 0
        for (token, outcome) in outcomes {
            switch outcome {
            case .delivered:
                delivered += 1
                // Nothing reported delivered was lost on the way.
                #expect(simulator.received(by: token) != nil)
            case .retryable(let failure):
                #expect(failure.error.isRetryable)
            default:
                Issue.record("unexpected outcome \(outcome)")
            }
        }
        #expect(delivered > 0)
        #expect(delivered < tokens.count)
        // The pool reconnects by itself and carries on.
        #expect(await eventually { pool.statistics.connections[.ready] == 2 })
        let after = try testRequest(token: hexToken(0x2fff))
        #expect(await pool.send(after) == .delivered(apnsID: after.apnsID))
        #expect(try metrics.expectCounter("apns_connection_attempts_total").totalValue > 2)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func refusedStreamsAreSentAgain() async throws {
        let simulator = try await startSimulator(faults: SimulatorFaults(refuseStreamEvery: 7))
        let metrics = TestMetrics()
        let pool = try makePool(simulator, metrics: metrics)
        let tokens = (0..<300).map { hexToken(0x3000 + $0) }
        let outcomes = try await burst(pool, tokens: tokens)
        #expect(outcomes.values.allSatisfy(isDelivered))
        for token in tokens { #expect(simulator.received(by: token)?.count == 1) }
        #expect(try metrics.expectCounter("apns_resends_total").totalValue >= 300 / 7)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func theStreamLimitIsNeverExceeded() async throws {
        let simulator = try await startSimulator(
            faults: SimulatorFaults(latencyMilliseconds: 5), maxConcurrentStreams: 8)
        let pool = try makePool(simulator, connections: 2)
        let tokens = (0..<400).map { hexToken(0x4000 + $0) }
        let outcomes = try await burst(pool, tokens: tokens)
        #expect(outcomes.values.allSatisfy(isDelivered))
        let connections = simulator.connections
        #expect(connections.allSatisfy { $0.limitViolations == 0 })
        #expect(simulator.peakConcurrentStreams <= 8)
        // The limit was lifted after the first success and used.
        #expect(simulator.peakConcurrentStreams > 1)
        #expect(pool.statistics.streamLimits.values.allSatisfy { $0 == 8 })
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func providerTokenRenewedAtFiftyMinutesWithAnInjectedClock() async throws {
        let clock = ManualClock(Date().timeIntervalSince1970.rounded(.down))
        let simulator = try await startSimulator(clock: { clock.now().seconds })
        let pool = try makePool(simulator, connections: 1, clock: clock)
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(1)))))
        #expect(pool.statistics.tokenRenewals == 1)
        clock.advance(49 * 60)
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(2)))))
        #expect(pool.statistics.tokenRenewals == 1)
        clock.advance(60)
        // At 50 minutes a new token; the server accepts the switch (more than 20 min).
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(3)))))
        #expect(pool.statistics.tokenRenewals == 2)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func expiredProviderTokenIsRenewedAndRetriedOnce() async throws {
        let clock = ManualClock(Date().timeIntervalSince1970.rounded(.down))
        let offset = Tally()  // server clock ahead of the client's, in minutes
        let simulator = try await startSimulator(clock: { clock.now().seconds + Double(offset.value) * 60 })
        let pool = try makePool(simulator, connections: 1, clock: clock)
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(1)))))
        // The client thinks its token is 30 minutes old, the server 61: expired.
        clock.advance(30 * 60)
        for _ in 0..<31 { offset.increment() }
        let request = try testRequest(token: hexToken(2))
        #expect(await pool.send(request) == .delivered(apnsID: request.apnsID))
        #expect(pool.statistics.tokenRenewals == 2)
        #expect(simulator.received(by: hexToken(2))?.count == 1)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func clockReadingsReachingThePoolOutOfOrderKeepOneToken() async throws {
        // Every other reading is 5 ms earlier than the one before, as when
        // two callers read the clock and then take the pool's lock in the
        // other order. Each connection must keep the token it started with.
        let clock = JitteryClock(Date().timeIntervalSince1970)
        let simulator = try await startSimulator()
        let pool = try makePool(simulator, connections: 2, clock: clock)
        let requests = try (0..<200).map { try testRequest(token: hexToken(0x6000 + $0)) }
        for chunk in stride(from: 0, to: requests.count, by: 20) {
            let outcomes = await pool.send(Array(requests[chunk..<(chunk + 20)]))
            #expect(outcomes == requests[chunk..<(chunk + 20)].map { .delivered(apnsID: $0.apnsID) })
        }
        #expect(pool.statistics.tokenRenewals == 1)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func anExpiredFreshTokenIsAConfigurationError() async throws {
        let clock = ManualClock(Date().timeIntervalSince1970.rounded(.down))
        // The server's clock runs 61 minutes ahead: every fresh token looks expired.
        let simulator = try await startSimulator(clock: { clock.now().seconds + 61 * 60 })
        let pool = try makePool(simulator, connections: 1, clock: clock)
        let outcome = await pool.send(try testRequest(token: hexToken(1)))
        guard case .misconfigured(let error) = outcome else {
            Issue.record("expected misconfigured, got \(outcome)")
            return
        }
        #expect(error.code == .providerTokenRejected)
        // Renewing now would earn TooManyProviderTokenUpdates: it did not.
        #expect(pool.statistics.tokenRenewals == 1)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func aSlowServerHitsTheDeadline() async throws {
        let simulator = try await startSimulator(faults: SimulatorFaults(latencyMilliseconds: 5000))
        let pool = try makePool(simulator, connections: 1, requestTimeout: 1)
        let outcome = await pool.send(try testRequest(token: hexToken(1)))
        guard case .retryable(let failure) = outcome else {
            Issue.record("expected a timeout, got \(outcome)")
            return
        }
        #expect(failure.error.code == .timeout)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func idleConnectionsArePingedAndStayOpen() async throws {
        let simulator = try await startSimulator()
        let metrics = TestMetrics()
        let pool = try makePool(simulator, connections: 1, idlePingInterval: 1, metrics: metrics)
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(1)))))
        let pinged = await eventually(timeout: 60) {
            ((try? metrics.expectCounter("apns_pings_total").totalValue) ?? 0) >= 3
        }
        #expect(pinged)
        // Answered pings keep the connection: still the first one, still usable.
        #expect(try metrics.expectCounter("apns_connection_attempts_total").totalValue == 1)
        #expect(isDelivered(await pool.send(try testRequest(token: hexToken(2)))))
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test func aBatchReturnsEveryOutcomeInOrder() async throws {
        let gone = hexToken(0x5410)
        let simulator = try await startSimulator(faults: SimulatorFaults(unregisteredTokens: [gone: 1_764_000_000_000]))
        let pool = try makePool(simulator)
        var requests = try (0..<250).map { try testRequest(token: hexToken(0x5000 + $0)) }
        requests[137] = try testRequest(token: gone)
        let outcomes = await pool.send(requests)
        #expect(outcomes.count == requests.count)
        for (index, outcome) in outcomes.enumerated() {
            if index == 137 {
                #expect(outcome == .tokenInvalid(reason: .unregistered, since: UnixTime(seconds: 1_764_000_000)))
            } else {
                #expect(outcome == .delivered(apnsID: requests[index].apnsID))
            }
        }
        #expect(await pool.send([]) == [])
        await pool.shutdown()
        try await simulator.stop()
    }
}
