import Foundation
import LiveDispatchCore
import LiveDispatchWorker
import Testing

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
              trust_roots: [/etc/sim.pem]
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
        #expect(configuration.apns.trustRoots == ["/etc/sim.pem"])
        #expect(configuration.coalesce.window == 0.1)
        #expect(configuration.coalesce.maxDelay == 2)
        #expect(configuration.activity.maxAge == 8 * 3600)
    }

    @Test("environment variables override the file")
    func environment() throws {
        let configuration = try WorkerConfiguration.parse(
            yaml: "coalesce:\n  window: 100ms\n", file: "test.yaml",
            environment: [
                "LIVEDISPATCH_COALESCE_WINDOW": "500ms", "LIVEDISPATCH_KAFKA_GROUP_ID": "owls",
                "LIVEDISPATCH_KAFKA_PROPERTIES_SASL_PASSWORD": "secret", "LIVEDISPATCH_APNS_TRUST_ROOTS": "/a.pem, /b.pem",
                "PATH": "/usr/bin",
            ])
        #expect(configuration.coalesce.window == 0.5)
        #expect(configuration.kafka.groupID == "owls")
        #expect(configuration.kafka.properties["sasl.password"] == "secret")
        #expect(configuration.apns.trustRoots == ["/a.pem", "/b.pem"])
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
                "Config/livedispatch.yaml:13:1: metrics: unknown section (known: activity, admin, apns, backpressure, coalesce, http, kafka, limits, retry, rules, shutdown)",
                "environment LIVEDISPATCH_RETRY_MAX_ATTEMPS: is not a LiveDispatch setting (did you mean LIVEDISPATCH_RETRY_MAX_ATTEMPTS?)",
                "Config/livedispatch.yaml:6:14: coalesce.max_delay: must be at least coalesce.window (0.25s)",
                "Config/livedispatch.yaml:12:18: backpressure.low_watermark: must be below backpressure.high_watermark (10)",
                "Config/livedispatch.yaml:8:13: apns.endpoint: expected production, sandbox, simulator or host:port, got \"nowhere\"",
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
                "c.yaml: apns.team_id: must be the 10-character team id for a real APNs endpoint",
                "c.yaml: apns.key_id: must be the 10-character key id for a real APNs endpoint",
                "c.yaml:3:13: apns.key_path: /nonexistent/AuthKey.p8 cannot be read",
            ])
        }
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
