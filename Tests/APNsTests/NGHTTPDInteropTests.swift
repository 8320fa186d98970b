import Crypto
import Foundation
import LiveDispatchCore
import Logging
import MetricsTestKit
import NIOPosix
import NIOSSL
import Synchronization
import Testing
@testable import APNs

/// A fixed-time clock tests move by hand.
final class ManualClock: APNsClock {
    private let seconds: Mutex<Double>
    init(_ seconds: Double) { self.seconds = Mutex(seconds) }
    func now() -> UnixTime { UnixTime(seconds: seconds.withLock { $0 }) }
    func advance(_ delta: Double) { seconds.withLock { $0 += delta } }
}

/// A clock whose readings are 0.1 ms apart but each up to 7 ms early, by a
/// fixed scrambled pattern: a later reading is often earlier than the one
/// before, as when callers read the clock and then take a lock in the
/// other order.
final class JitteryClock: APNsClock {
    private let state: Mutex<(seconds: Double, readings: UInt32)>
    init(_ seconds: Double) { self.state = Mutex((seconds, 0)) }
    func now() -> UnixTime {
        state.withLock { state in
            state.readings &+= 1
            state.seconds += 0.0001
            let early = Double((state.readings &* 0x9E37_79B1) >> 29) / 1000
            return UnixTime(seconds: state.seconds - early)
        }
    }
}

let testKey = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "KEY1234567", teamID: "TEAM123456")

func testRequest(token: String, payload: String = #"{"aps":{"event":"update","timestamp":1764000000,"content-state":{}}}"#)
    throws -> APNsRequest
{
    APNsRequest(
        destination: .device(try DeviceToken(hex: token)), bundleID: "com.example.app", priority: .immediate,
        expiration: nil, apnsID: UUID().uuidString.lowercased(), payload: Array(payload.utf8))
}

func hexToken(_ index: Int) -> String {
    let digits = String(index, radix: 16)
    return String(repeating: "0", count: 64 - digits.count) + digits
}

@Suite("Client against nghttpd", .serialized)
struct NGHTTPDInteropTests {
    let logger: Logger = {
        var logger = Logger(label: "apns-tests") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = ProcessInfo.processInfo.environment["APNS_TEST_TRACE"] != nil ? .trace : .critical
        return logger
    }()

    func makePool(
        port: Int, trustRoots: [NIOSSLCertificate], connections: Int = 2, maxQueued: Int = 1000,
        requestTimeout: Double = 30, metrics: TestMetrics? = nil
    ) throws -> APNsConnectionPool {
        let configuration = APNsClientConfiguration(
            endpoint: .init(host: "127.0.0.1", port: port, serverName: "localhost"), connections: connections,
            maxQueued: maxQueued, requestTimeout: requestTimeout, additionalTrustRoots: trustRoots)
        return try APNsConnectionPool(
            configuration: configuration, signingKey: testKey, logger: logger, metricsFactory: metrics ?? TestMetrics())
    }

    @Test func completesRequestsOverTLSAndHTTP2() async throws {
        let tokens = (0..<8).map(hexToken)
        let server = try NGHTTPDServer(tokens: tokens)
        defer { server.kill() }
        try await server.waitUntilListening()
        let metrics = TestMetrics()
        let pool = try makePool(port: server.port, trustRoots: try server.certificate.trustRoots(), metrics: metrics)

        let outcomes = try await withThrowingTaskGroup(of: APNsOutcome.self) { group in
            for index in 0..<400 {
                let request = try testRequest(token: tokens[index % tokens.count])
                group.addTask { await pool.send(request) }
            }
            return try await group.reduce(into: [APNsOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == 400)
        #expect(outcomes.allSatisfy { if case .delivered = $0 { true } else { false } })

        // A path the server does not have answers 404: a permanent failure.
        let missing = await pool.send(try testRequest(token: hexToken(999)))
        #expect(missing == .permanent(status: 404, reason: .unknown("HTTP 404")))

        // nghttpd announces 100 streams; a connection applies it after its
        // first success (one that carried none yet still allows 1).
        let limits = pool.statistics.streamLimits.values
        #expect(limits.contains(100))
        #expect(limits.allSatisfy { $0 == 100 || $0 == 1 })
        #expect(pool.statistics.tokenRenewals == 1)
        let delivered = try metrics.expectCounter("apns_requests_total", [("status", "200"), ("reason", "")])
        #expect(delivered.totalValue == 400)
        #expect(try metrics.expectTimer("apns_request_duration_seconds").values.count == 401)
        await pool.shutdown()
        #expect(pool.statistics.connections.values.reduce(0, +) == 0)
    }

    @Test func refusesAServerItCannotVerify() async throws {
        let server = try NGHTTPDServer(tokens: [hexToken(1)])
        defer { server.kill() }
        try await server.waitUntilListening()
        // No extra trust roots: the self-signed certificate is refused, nothing is sent.
        let pool = try makePool(port: server.port, trustRoots: [], connections: 1, requestTimeout: 2)
        let outcome = await pool.send(try testRequest(token: hexToken(1)))
        guard case .retryable(let failure) = outcome else {
            Issue.record("expected a retryable failure, got \(outcome)")
            return
        }
        #expect(failure.error.code == .timeout)
        #expect(pool.statistics.connections[.ready] == 0)
        await pool.shutdown()
    }

    @Test func resetConnectionsResolveEveryRequestExactlyOnceAndReconnect() async throws {
        let tokens = (0..<4).map(hexToken)
        let certificate = try TestCertificate.make()
        defer { certificate.remove() }
        let server = try NGHTTPDServer(tokens: tokens, certificate: certificate)
        try await server.waitUntilListening()
        let pool = try makePool(port: server.port, trustRoots: try certificate.trustRoots(), requestTimeout: 10)
        let resolved = Tally()

        let count = 2000
        let outcomes = try await withThrowingTaskGroup(of: APNsOutcome.self) { group in
            for index in 0..<count {
                let request = try testRequest(token: tokens[index % tokens.count])
                group.addTask {
                    let outcome = await pool.send(request)
                    resolved.increment()
                    return outcome
                }
            }
            // Kill the server in the middle of the burst.
            _ = await eventually { resolved.value >= 200 }
            server.kill()
            return try await group.reduce(into: [APNsOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == count)
        #expect(resolved.value == count)
        let delivered = outcomes.filter { if case .delivered = $0 { true } else { false } }.count
        let retryable = outcomes.filter { if case .retryable = $0 { true } else { false } }.count
        #expect(delivered >= 200)
        #expect(delivered + retryable == count)

        // The server comes back on the same port: the pool reconnects by itself.
        let restarted = try NGHTTPDServer(tokens: tokens, port: server.port, certificate: certificate)
        defer { restarted.kill() }
        try await restarted.waitUntilListening()
        let reconnected = await eventually(timeout: 90) { pool.statistics.connections[.ready] ?? 0 > 0 }
        #expect(reconnected)
        let after = await pool.send(try testRequest(token: tokens[1]))
        if case .delivered = after {} else { Issue.record("after reconnecting: \(after)") }
        await pool.shutdown()
    }
}
