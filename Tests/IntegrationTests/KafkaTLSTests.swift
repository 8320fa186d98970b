import Foundation
import LiveDispatchCore
import Testing

/// The worker against Kafka over TLS (and SASL), as managed Kafka requires:
/// Tansu behind stunnel with a certificate a CA made in the test signed, the
/// worker configured as the example overlay configures it
/// (`LIVEDISPATCH_KAFKA_PROPERTIES_*`).
@Suite("Kafka over TLS and SASL", .serialized)
struct KafkaTLSTests {
    @Test("over TLS with the broker's certificate verified against the CA: the demo's replay is delivered")
    func replayOverTLS() async throws {
        let stack = try await TLSBrokerStack()
        let adminPort = try freePort()
        let record = stack.directory.appendingPathComponent("tls.jsonl")
        let examples = TestPaths.repositoryRoot.appendingPathComponent("Config/examples").path
        let worker = try stack.worker(
            group: "tls", adminPort: adminPort,
            environment: [
                "LIVEDISPATCH_KAFKA_PROPERTIES_SECURITY_PROTOCOL": "SSL",
                "LIVEDISPATCH_KAFKA_PROPERTIES_SSL_CA_LOCATION": stack.certificateAuthority.path,
            ],
            record: record, arguments: ["--replay", examples])
        // The late goal comes near the replay's end: once it is dead-lettered, SIGTERM stops a worker with nothing left to publish.
        try await waitFor("the late goal's dead letter", timeout: .seconds(90)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            return worker.standardOutputLines.contains { $0.contains("dead letter activity-ended") } ? true : nil
        }
        let tokens = RealBrokerEndToEndTests.owlTokens + [RealBrokerEndToEndTests.deliveryToken] + RealBrokerEndToEndTests.fanUpdateTokens
        try await waitFor("the end push to every device", timeout: .seconds(90)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            let byToken = RealBrokerStack.pushesByToken(record)
            return tokens.allSatisfy { byToken[$0]?.last?.event == "end" } ? true : nil
        }
        RealBrokerEndToEndTests.expectNoStartToUpdateTokens(RealBrokerStack.pushesByToken(record))
        #expect(try await waitUntilReady(port: adminPort, timeout: .seconds(30)).ready == 200)
        #expect(try await worker.stop() == 0, "\(worker.standardErrorLines.suffix(8))")
    }

    /// A worker that cannot get through to `stack`'s broker: within seconds
    /// it logs why, naming the broker; it keeps trying, serving its health
    /// routes meanwhile: `/healthz` 200, `/readyz` 503 (never 200), `/status`
    /// naming the broker and the reason, any other route 503; SIGTERM ends
    /// it with status 0.
    static func expectRefused(_ worker: BackgroundProcess, stack: TLSBrokerStack, reason: String, adminPort: Int) async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let line = try await waitFor("an error naming \(stack.bootstrap) and \(reason.debugDescription)", timeout: .seconds(20)) {
            worker.standardErrorLines.first { $0.contains(stack.bootstrap) && $0.contains(reason) }
        }
        #expect(clock.now - started < .seconds(5), "the first error came after \(clock.now - started): \(line)")
        let status = try await waitFor("/status naming the broker and the reason", timeout: .seconds(40)) { () -> String? in
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            guard let answer = try adminGet(port: adminPort, "/status"), answer.body.contains(reason) else { return nil }
            return answer.body
        }
        let json = try JSONValue.parse(status)
        #expect(json["phase"]?.stringValue == "connecting", "\(status)")
        #expect(json["ready"] == .bool(false), "\(status)")
        #expect(json["kafka_error"]?.stringValue?.contains(stack.bootstrap) == true, "\(status)")
        #expect(try adminGet(port: adminPort, "/healthz")?.status == 200)
        let ready = try #require(try adminGet(port: adminPort, "/readyz"))
        #expect(ready.status == 503 && ready.body.hasPrefix("waiting for Kafka"), "\(ready)")
        let other = try #require(try adminGet(port: adminPort, "/v1/activities/any"))
        #expect(other.status == 503 && other.body.contains("unavailable"), "\(other)")
        // It tries again rather than giving up.
        try await waitFor("a second attempt that fails the same way", timeout: .seconds(60)) { () -> Bool? in
            if let answer = try adminGet(port: adminPort, "/readyz") { #expect(answer.status == 503) }
            let failures = worker.standardErrorLines.filter { $0.contains("Kafka cannot be reached") && $0.contains(reason) }
            return failures.count >= 2 ? true : nil
        }
        let stopping = clock.now
        #expect(try await worker.stop(timeout: .seconds(30)) == 0, "\(worker.standardErrorLines.suffix(5))")
        #expect(clock.now - stopping < .seconds(15), "SIGTERM took \(clock.now - stopping)")
        #expect(worker.standardOutputLines.contains { $0.contains("stopped before Kafka could be reached") }, "\(worker.standardOutputLines.suffix(3))")
    }

    @Test("a CA that did not sign the broker's certificate: an error naming the broker and the failed verification within seconds, not ready while it tries again, stopped by SIGTERM")
    func wrongCertificateAuthority() async throws {
        let stack = try await TLSBrokerStack()
        let adminPort = try freePort()
        let worker = try stack.worker(
            group: "tls-wrong-ca", adminPort: adminPort,
            environment: [
                "LIVEDISPATCH_KAFKA_PROPERTIES_SECURITY_PROTOCOL": "SSL",
                "LIVEDISPATCH_KAFKA_PROPERTIES_SSL_CA_LOCATION": try stack.unrelatedCertificateAuthority().path,
            ],
            record: stack.directory.appendingPathComponent("wrong-ca.jsonl"), createTopics: false)
        try await Self.expectRefused(worker, stack: stack, reason: "certificate verify failed", adminPort: adminPort)
    }

    /// The `LIVEDISPATCH_KAFKA_PROPERTIES_*` variables the example overlay's
    /// Deployment patch sets, by name.
    static func overlayKafkaProperties() throws -> [String: String] {
        let patch = try String(
            contentsOf: TestPaths.repositoryRoot.appendingPathComponent("deploy/kubernetes/overlays/example/deployment-patch.yaml"),
            encoding: .utf8)
        var properties: [String: String] = [:]
        var name: String?
        for line in patch.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("- name: ") {
                name = String(line.dropFirst("- name: ".count))
            } else if line.hasPrefix("value: "), let current = name, current.hasPrefix("LIVEDISPATCH_KAFKA_PROPERTIES_") {
                properties[current] = String(line.dropFirst("value: ".count)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                name = nil
            }
        }
        return properties
    }

    @Test("SASL_SSL as the example overlay sets it (SCRAM-SHA-512) with a password the broker does not know: an error naming the broker and the failed authentication, the password never printed")
    func wrongPassword() async throws {
        let overlay = try Self.overlayKafkaProperties()
        #expect(overlay["LIVEDISPATCH_KAFKA_PROPERTIES_SECURITY_PROTOCOL"] == "SASL_SSL", "\(overlay)")
        #expect(overlay["LIVEDISPATCH_KAFKA_PROPERTIES_SASL_MECHANISM"] != nil, "\(overlay)")
        #expect(overlay["LIVEDISPATCH_KAFKA_PROPERTIES_SSL_CA_LOCATION"] != nil, "\(overlay)")
        let stack = try await TLSBrokerStack(authentication: true)
        let adminPort = try freePort()
        let password = "not-the-password-\(UUID().uuidString.prefix(8))"
        // The CA and the password are the installation's Secret, mounted and passed as the base Deployment does.
        var environment = overlay
        environment["LIVEDISPATCH_KAFKA_PROPERTIES_SSL_CA_LOCATION"] = stack.certificateAuthority.path
        environment["LIVEDISPATCH_KAFKA_PROPERTIES_SASL_PASSWORD"] = password
        let worker = try stack.worker(
            group: "sasl-wrong-password", adminPort: adminPort, environment: environment,
            record: stack.directory.appendingPathComponent("sasl.jsonl"), createTopics: false)
        try await Self.expectRefused(worker, stack: stack, reason: "SASL authentication error", adminPort: adminPort)
        let printed = worker.standardErrorLines + worker.standardOutputLines
        #expect(!printed.contains { $0.contains(password) }, "the password was printed")
    }
}
