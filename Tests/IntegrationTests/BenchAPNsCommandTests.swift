import APNsSimulator
import Crypto
import Foundation
import Logging
import Testing

/// `livedispatch bench apns` as a process, against the simulator over TLS.
@Suite("livedispatch bench apns")
struct BenchAPNsCommandTests {
    @Test func sendsEveryPushAndPrintsTheRateAndLatency() async throws {
        let key = P256.Signing.PrivateKey()
        let simulator = try await APNsSimulator.start(
            configuration: .init(
                teamID: "TEAM123456", keyID: "KEY1234567", publicKey: key.publicKey, bundleID: "com.example.app",
                threads: 1),
            logger: Logger(label: "simulator") { _ in SwiftLogNoOpLogHandler() })
        let directory = try TestPaths.temporaryDirectory("bench-apns")
        let keyFile = directory.appendingPathComponent("key.p8")
        let certificateFile = directory.appendingPathComponent("sim.pem")
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        try simulator.certificate.certificatePEM.write(to: certificateFile, atomically: true, encoding: .utf8)
        let token = String(repeating: "0b", count: 32)

        let result = try runProcess([
            "bench", "apns", "--endpoint", "https://127.0.0.1:\(simulator.port)", "--server-name", "localhost",
            "--trust-roots", certificateFile.path, "--key", keyFile.path, "--key-id", "KEY1234567",
            "--team-id", "TEAM123456", "--bundle-id", "com.example.app", "--connections", "2",
            "--requests", "300", "--token", token,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("outcomes: delivered=300\n"))
        #expect(result.standardOutput.contains("pushes/s: "))
        #expect(result.standardOutput.contains("latency p50: "))
        // The warm-up push per connection comes on top of the 300.
        #expect(simulator.received(by: token)?.count == 302)
        try await simulator.stop()
    }

    @Test func anUnverifiableServerFailsWithAMessage() async throws {
        let key = P256.Signing.PrivateKey()
        let simulator = try await APNsSimulator.start(
            configuration: .init(
                teamID: "TEAM123456", keyID: "KEY1234567", publicKey: key.publicKey, bundleID: "com.example.app",
                threads: 1),
            logger: Logger(label: "simulator") { _ in SwiftLogNoOpLogHandler() })
        // No trust roots: the self-signed certificate is refused and the warm-up push times out.
        let result = try runProcess([
            "bench", "apns", "--endpoint", "https://127.0.0.1:\(simulator.port)", "--server-name", "localhost",
            "--requests", "10", "--timeout", "2", "--token", String(repeating: "0c", count: 32),
        ])
        #expect(result.status != 0)
        #expect(result.standardError.contains("warm-up push failed"))
        try await simulator.stop()
    }
}
