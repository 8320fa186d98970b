import APNsSimulator
import Foundation

/// Tansu behind a TLS proxy (Debian's stunnel) whose certificate a CA made
/// here signed (``SimulatorCertificate``: a self-signed certificate for
/// `localhost` and `127.0.0.1` that is its own CA). Tansu 0.6 cannot serve
/// TLS itself: its `--cert` and `--key` options exclude each other. Tansu
/// advertises the proxy's address, so every client connection after the
/// bootstrap goes through TLS too; optionally it requires SASL
/// authentication (SCRAM).
final class TLSBrokerStack: Sendable {
    let directory: URL
    let broker: BackgroundProcess
    let proxy: BackgroundProcess
    /// The TLS address clients use.
    let bootstrap: String
    /// Tansu's own plaintext address on loopback, for creating topics.
    let plaintextBootstrap: String
    let libraryPath: String
    /// The CA (PEM file) that signed the proxy's certificate.
    let certificateAuthority: URL
    let partitions: Int

    init(authentication: Bool = false, partitions: Int = 4) async throws {
        directory = try TestPaths.temporaryDirectory("livedispatch-tls")
        self.partitions = partitions
        let path = try runProcess(["library-path"], executable: RealBrokerStack.script)
        guard path.status == 0 else { throw WaitTimeout(what: "the newer librdkafka (run scripts/bootstrap): \(path.standardError)") }
        libraryPath = path.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)

        let identity = try SimulatorCertificate.generate(commonName: "LiveDispatch test Kafka CA")
        certificateAuthority = directory.appendingPathComponent("ca.crt")
        let key = directory.appendingPathComponent("broker.key")
        try Data(identity.certificatePEM.utf8).write(to: certificateAuthority)
        try Data(identity.privateKeyPEM.utf8).write(to: key)

        let tlsPort = try freePort()
        bootstrap = "127.0.0.1:\(tlsPort)"
        broker = try BackgroundProcess(
            ["run", "--advertise", bootstrap] + (authentication ? ["--authentication"] : []), executable: RealBrokerStack.script)
        let line = try await broker.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("bootstrap: ") }
        plaintextBootstrap = String(line.dropFirst("bootstrap: ".count))
        _ = try await broker.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("ready in") }

        let configuration = directory.appendingPathComponent("stunnel.conf")
        try Data("""
            foreground = yes
            pid =
            [kafka]
            accept = \(bootstrap)
            connect = \(plaintextBootstrap)
            cert = \(certificateAuthority.path)
            key = \(key.path)

            """.utf8).write(to: configuration)
        proxy = try BackgroundProcess([configuration.path], executable: URL(fileURLWithPath: "/usr/bin/stunnel4"))
        let proxy = self.proxy
        try await waitFor("stunnel to accept on \(bootstrap)", timeout: .seconds(20)) {
            if !proxy.isRunning { throw WaitTimeout(what: "a running stunnel; it exited: \(proxy.standardErrorLines.suffix(5))") }
            return proxy.standardErrorLines.contains { $0.contains("Configuration successful") } ? true : nil
        }

        if !authentication {
            for topic in ["sports.scores", "delivery.orders"] {
                let created = try runProcess(["topic", plaintextBootstrap, topic, String(partitions)], executable: RealBrokerStack.script)
                guard created.status == 0 else { throw WaitTimeout(what: "topic \(topic) on Tansu: \(created.standardError)") }
            }
        }
    }

    /// A CA (PEM file) made here that signed nothing the proxy serves.
    func unrelatedCertificateAuthority() throws -> URL {
        let other = try SimulatorCertificate.generate(commonName: "LiveDispatch test unrelated CA")
        let url = directory.appendingPathComponent("unrelated-ca.crt")
        try Data(other.certificatePEM.utf8).write(to: url)
        return url
    }

    /// A worker started with the shipped configuration, `LIVEDISPATCH_*`
    /// overrides for this broker and then `environment` (the
    /// `LIVEDISPATCH_KAFKA_PROPERTIES_*` of an installation), its admin
    /// endpoint on `adminPort`; `createTopics` false makes it look
    /// the internal topics up instead (a 10 s wait for an unreachable
    /// broker rather than 30 s).
    func worker(
        group: String, adminPort: Int, environment overrides: [String: String], record: URL, createTopics: Bool = true,
        arguments: [String] = []
    ) throws -> BackgroundProcess {
        var environment = shippedConfigurationOverrides(
            bootstrap: bootstrap, group: group, partitions: partitions, adminPort: adminPort)
        environment["LD_LIBRARY_PATH"] = libraryPath
        environment["LIVEDISPATCH_KAFKA_CREATE_TOPICS"] = String(createTopics)
        environment["LIVEDISPATCH_RULES_PATH"] = TestPaths.repositoryRoot.appendingPathComponent("Config/rules").path
        environment.merge(overrides) { _, new in new }
        let configuration = TestPaths.repositoryRoot.appendingPathComponent("Config/livedispatch.yaml").path
        return try BackgroundProcess(
            ["run", "--config", configuration, "--simulator-record", record.path] + arguments, environment: environment)
    }
}
