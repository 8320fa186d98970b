import APNsSimulator
import Crypto
import Foundation
import LiveDispatchCore
import LiveDispatchWorker
import Testing

/// Key and certificate files in a fresh directory: a good `.p8`, a P-384
/// key, a file that is no key, and a CA certificate.
struct KeyFiles {
    let directory: URL
    var key: String { directory.appendingPathComponent("AuthKey.p8").path }
    var p384: String { directory.appendingPathComponent("p384.p8").path }
    var garbage: String { directory.appendingPathComponent("garbage.p8").path }
    var certificate: String { directory.appendingPathComponent("ca.pem").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
        try P384.Signing.PrivateKey().pemRepresentation.write(toFile: p384, atomically: true, encoding: .utf8)
        try "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        try SimulatorCertificate.generate().certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
    }
}

@Suite("Worker configuration")
struct WorkerConfigurationTests {
    static let shipped = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Config/livedispatch.yaml").path

    @Test("the shipped file loads and equals the documented defaults")
    func shippedDefaults() throws {
        let configuration = try WorkerConfiguration.load(path: Self.shipped, environment: [:])
        #expect(configuration == WorkerConfiguration())
        #expect(configuration.topic(.tokenStore) == "livedispatch.token-store")
    }

    @Test("values of every kind are read")
    func values() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(yaml: """
            kafka:
              bootstrap: broker-1:9092,broker-2:9092
              create_topics: no
              partitions: 12
              properties:
                security.protocol: SASL_SSL
                sasl.mechanism: PLAIN
            apns:
              endpoint: 127.0.0.1:2197
              environment: sandbox
              team_id: TEAM000001
              key_id: KEY0000001
              key_path: \(files.key)
              trust_roots: [\(files.certificate)]
            coalesce:
              window: 100ms
              max_delay: 2
            activity:
              max_age: 8h
            """, file: "test.yaml")
        #expect(configuration.kafka.bootstrap == "broker-1:9092,broker-2:9092")
        #expect(configuration.kafka.createTopics == false)
        #expect(configuration.kafka.partitions == 12)
        #expect(configuration.kafka.properties == ["security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"])
        #expect(configuration.apns.endpoint == "127.0.0.1:2197")
        #expect(configuration.apns.environment == .sandbox)
        #expect(configuration.apns.trustRoots == [files.certificate])
        #expect(configuration.coalesce.window == 0.1)
        #expect(configuration.coalesce.maxDelay == 2)
        #expect(configuration.activity.maxAge == 8 * 3600)
    }

    @Test("environment variables override the file")
    func environment() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(
            yaml: "coalesce:\n  window: 100ms\n", file: "test.yaml",
            environment: [
                "LIVEDISPATCH_COALESCE_WINDOW": "500ms", "LIVEDISPATCH_KAFKA_GROUP_ID": "owls",
                "LIVEDISPATCH_KAFKA_PROPERTIES_SASL_PASSWORD": "secret", "LIVEDISPATCH_APNS_TRUST_ROOTS": "\(files.certificate), \(files.certificate)",
                "PATH": "/usr/bin",
            ])
        #expect(configuration.coalesce.window == 0.5)
        #expect(configuration.kafka.groupID == "owls")
        #expect(configuration.kafka.properties["sasl.password"] == "secret")
        #expect(configuration.apns.trustRoots == [files.certificate, files.certificate])
    }

    @Test("every problem is reported at once with file:line:column and the key")
    func problems() {
        let yaml = """
            kafka:
              bootstrp: localhost:9092
              partitions: many
            coalesce:
              window: fast
              max_delay: 100ms
            apns:
              endpoint: nowhere
              environment: staging
            backpressure:
              high_watermark: 10
              low_watermark: 20
            metrics: {}
            """
        #expect(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: yaml, file: "Config/livedispatch.yaml") }
        do {
            _ = try WorkerConfiguration.parse(yaml: yaml, file: "Config/livedispatch.yaml", environment: ["LIVEDISPATCH_RETRY_MAX_ATTEMPS": "3"])
        } catch {
            #expect(error.problems.map(\.description) == [
                "Config/livedispatch.yaml:2:3: kafka.bootstrp: unknown key (did you mean bootstrap?)",
                "Config/livedispatch.yaml:3:15: kafka.partitions: expected a whole number, got \"many\"",
                "Config/livedispatch.yaml:5:11: coalesce.window: expected a duration such as 250ms, 2s, 5m or 12h, got \"fast\"",
                "Config/livedispatch.yaml:9:16: apns.environment: expected one of production, sandbox, got \"staging\"",
                "Config/livedispatch.yaml:13:1: metrics: unknown section (known: activity, admin, apns, apps, backpressure, budget, coalesce, http, idempotency, kafka, limits, push_to_start, retry, rules, shutdown, tracing, webhooks)",
                "environment LIVEDISPATCH_RETRY_MAX_ATTEMPS: is not a LiveDispatch setting (did you mean LIVEDISPATCH_RETRY_MAX_ATTEMPTS?)",
                "Config/livedispatch.yaml:6:14: coalesce.max_delay: must be at least coalesce.window (0.25s)",
                "Config/livedispatch.yaml:12:18: backpressure.low_watermark: must be below backpressure.high_watermark (10)",
                "Config/livedispatch.yaml:8:13: apns.endpoint: expected production, sandbox, simulator or host:port with a port from 1 to 65535, got \"nowhere\"",
            ])
        }
    }

    @Test("a real APNs endpoint needs the team, key id and key file")
    func realEndpoint() {
        do {
            _ = try WorkerConfiguration.parse(yaml: "apns:\n  endpoint: production\n  key_path: /nonexistent/AuthKey.p8\n", file: "c.yaml")
            Issue.record("expected an error")
        } catch {
            #expect(error.problems.map(\.description) == [
                "c.yaml:2:13: apns.team_id: must be the 10-character team id for a real APNs endpoint",
                "c.yaml:2:13: apns.key_id: must be the 10-character key id for a real APNs endpoint",
                "c.yaml:3:13: apns.key_path: /nonexistent/AuthKey.p8 does not exist",
            ])
        }
    }

    @Test("a duplicate key is refused with its position and the file is never echoed")
    func duplicateKeyNeverEchoes() throws {
        let yaml = """
            kafka:
              bootstrap: broker-1:9092
              properties:
                sasl.password: hunter2-secret
              bootstrap: broker-2:9092
            """
        let error = try #require(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: yaml, file: "c.yaml") }
        #expect(error.problems.map(\.description) == ["c.yaml:2:3: duplicate key 'bootstrap' (each key may appear once)"])
        #expect(!error.description.contains("hunter2"))
        for broken in [
            "kafka:\n  properties:\n    sasl.password: \"hunter2-secret\n",
            "kafka:\n  properties:\n    sasl.password: hunter2-secret\n\t bad: tab\n",
            "kafka: {properties: {sasl.password: hunter2-secret}\n",
            "kafka:\n  properties: &a\n    sasl.password: hunter2-secret\n  x: *b\n",
        ] {
            let error = try #require(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: broken, file: "c.yaml") }
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.problems.allSatisfy { $0.location.split(separator: ":").count == 3 }, "\(error)")
        }
    }

    @Test("apns.endpoint must be a host and a port from 1 to 65535")
    func endpoint() throws {
        let files = try KeyFiles()
        for endpoint in ["not a host::99999", "host:0", "host:65536", "host:", ":443", "host", "-host:443", "h\u{f6}st:443", "host:+44"] {
            let yaml = "apns:\n  endpoint: \"\(endpoint)\"\n  team_id: TEAM000001\n  key_id: KEY0000001\n  key_path: \(files.key)\n"
            let error = try #require(throws: ConfigurationError.self, "\(endpoint)") { try WorkerConfiguration.parse(yaml: yaml, file: "c.yaml") }
            #expect(error.problems.map(\.description) == [
                "c.yaml:2:13: apns.endpoint: expected production, sandbox, simulator or host:port with a port from 1 to 65535, got \(endpoint.debugDescription)",
            ])
        }
        for endpoint in ["127.0.0.1:1", "apns.example.com:65535", "localhost:2197"] {
            let yaml = "apns:\n  endpoint: \(endpoint)\n  team_id: TEAM000001\n  key_id: KEY0000001\n  key_path: \(files.key)\n"
            #expect(try WorkerConfiguration.parse(yaml: yaml, file: "c.yaml").apns.endpoint == endpoint)
        }
    }

    @Test("the key, the trust roots, the request timeout and admin.listen are checked at load, with positions")
    func apnsFiles() throws {
        let files = try KeyFiles()
        func problems(_ apns: String, admin: String = "") throws -> [String] {
            let yaml = "apns:\n  endpoint: 127.0.0.1:2197\n  team_id: TEAM000001\n  key_id: KEY0000001\n" + apns + admin
            do {
                _ = try WorkerConfiguration.parse(yaml: yaml, file: "c.yaml")
                return []
            } catch {
                return error.problems.map(\.description)
            }
        }
        #expect(try problems("") == [
            "c.yaml:2:13: apns.key_path: must name the .p8 signing key file (PKCS#8 PEM) for endpoint \"127.0.0.1:2197\"",
        ])
        #expect(try problems("  key_path: \"\"\n") == [
            "c.yaml:5:13: apns.key_path: must name the .p8 signing key file (PKCS#8 PEM) for endpoint \"127.0.0.1:2197\"",
        ])
        #expect(try problems("  key_path: \(files.directory.path)\n") == ["c.yaml:5:13: apns.key_path: \(files.directory.path) is a directory, not a file"])
        #expect(try problems("  key_path: /dev/zero\n") == ["c.yaml:5:13: apns.key_path: /dev/zero is not a regular file"])
        #expect(try problems("  key_path: \(files.p384)\n") == ["c.yaml:5:13: apns.key_path: \(files.p384) is a P-384 key; APNs signing keys are P-256 (ES256)"])
        #expect(try problems("  key_path: \(files.garbage)\n") == [
            "c.yaml:5:13: apns.key_path: \(files.garbage) is not a P-256 private key in PKCS#8 PEM (a .p8 file starting with -----BEGIN PRIVATE KEY-----)",
        ])
        #expect(try problems("  key_path: \(files.key)\n  trust_roots: [\(files.directory.path)/missing.pem, \(files.key)]\n") == [
            "c.yaml:6:16: apns.trust_roots: \(files.directory.path)/missing.pem does not exist",
            "c.yaml:6:16: apns.trust_roots: \(files.key) is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)",
        ])
        #expect(try problems("  key_path: \(files.key)\n  request_timeout: 0s\n") == ["c.yaml:6:20: apns.request_timeout: must be more than 0s"])
        #expect(try problems("  key_path: \(files.key)\n", admin: "admin:\n  listen: nowhere\n") == [
            "c.yaml:7:11: admin.listen: expected host:port or [ipv6]:port with a port from 0 to 65535, or empty to turn the endpoint off; got \"nowhere\"",
        ])
        #expect(try problems("  key_path: \(files.key)\n", admin: "admin:\n  listen: \"\"\n").isEmpty)
        // IPv6 in brackets, as README and the loopback check name it.
        for listen in ["\"[::1]:9464\"", "\"[::]:0\"", "\"[fe80::1]:80\""] {
            #expect(try problems("  key_path: \(files.key)\n", admin: "admin:\n  listen: \(listen)\n  probe_listen: \(listen)\n").isEmpty, "\(listen)")
        }
        for listen in ["\"[::1]\"", "\"[::1:9464\"", "\"::1:9464\"", "\"[zz::1]:80\"", "\"[]:80\""] {
            #expect(try problems("  key_path: \(files.key)\n", admin: "admin:\n  listen: \(listen)\n").count == 1, "\(listen)")
        }
        #expect(try problems("  key_path: \(files.key)\n", admin: "admin:\n  probe_listen: nowhere\n") == [
            "c.yaml:7:17: admin.probe_listen: expected host:port or [ipv6]:port with a port from 0 to 65535, or empty for none; got \"nowhere\"",
        ])
        #expect(try problems("  key_path: \(files.key)\n  trust_roots: [\(files.certificate)]\n", admin: "admin:\n  listen: 0.0.0.0:0\n").isEmpty)
    }

    @Test("invalid YAML is reported with its position")
    func invalidYAML() {
        do {
            _ = try WorkerConfiguration.parse(yaml: "kafka:\n  bootstrap: [unclosed\n", file: "c.yaml")
            Issue.record("expected an error")
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.problems[0].description.hasPrefix("c.yaml:3:1: invalid YAML"))
        }
    }
}
