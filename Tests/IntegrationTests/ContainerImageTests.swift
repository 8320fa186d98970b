import Foundation
import LiveDispatchCore
import Testing

/// The worker's container image, run with podman as an SRE runs it: the
/// shipped configuration with `LIVEDISPATCH_*` overrides, a read-only root
/// filesystem, the image's non-root user, no added capabilities, against a
/// real broker (Tansu) on the host's network.
@Suite(
    "Container image, run", .serialized,
    .enabled(if: ContainerImage.isBuilt, "no livedispatch:test image: `make test` builds it (scripts/image build livedispatch:test)"))
struct ContainerImageTests {
    static func environment(_ stack: RealBrokerStack, group: String, adminPort: Int) -> [String: String] {
        shippedConfigurationOverrides(bootstrap: stack.bootstrap, group: group, partitions: stack.partitions, adminPort: adminPort)
    }

    static func name(_ role: String) -> String { "livedispatch-test-\(role)-\(UUID().uuidString.prefix(8).lowercased())" }

    @Test("the image's entry point answers --help, it runs as a non-root user with a health check, and its librdkafka is 2.1.1 or newer")
    func image() throws {
        let help = try ContainerImage.podman(["run", "--rm", "--network", "host", ContainerImage.tag, "--help"])
        #expect(help.status == 0, "\(help.standardError)")
        #expect(help.standardOutput.contains("--replay"), "\(help.standardOutput)")

        let inspected = try ContainerImage.podman(["image", "inspect", "--format", "{{.Config.User}} {{.Config.Healthcheck.Test}}", ContainerImage.tag])
        #expect(inspected.status == 0, "\(inspected.standardError)")
        #expect(inspected.standardOutput.hasPrefix("10001:10001 "), "\(inspected.standardOutput)")
        #expect(inspected.standardOutput.contains("/healthz"), "\(inspected.standardOutput)")

        let libraries = try ContainerImage.podman(["run", "--rm", "--network", "host", "--entrypoint", "sh", ContainerImage.tag, "-c", "ldconfig -p"])
        #expect(libraries.standardOutput.contains("librdkafka.so.1 "), "\(libraries.standardOutput)")
        let version = try ContainerImage.podman(
            ["run", "--rm", "--network", "host", "--entrypoint", "dpkg-query", ContainerImage.tag, "-W", "-f=${Version}", "librdkafka1"])
        let parts = version.standardOutput.split(whereSeparator: { !$0.isNumber }).prefix(3).compactMap { Int($0) }
        #expect(parts.count == 3 && parts.lexicographicallyPrecedes([2, 1, 1]) == false, "librdkafka1 \(version.standardOutput)")
    }

    @Test("the demo's replay in the image against Tansu, with podman's default capabilities: pushes delivered, endpoints answered, SIGTERM drains with status 0")
    func replay() async throws {
        let stack = try await RealBrokerStack()
        // The image's own admin address (0.0.0.0:9464), which its HEALTHCHECK asks.
        let adminPort = 9464
        var environment = Self.environment(stack, group: "container-replay", adminPort: adminPort)
        environment["LIVEDISPATCH_ADMIN_LISTEN"] = nil
        // The simulator's record is the one writable mount (the image's user is 10001).
        let records = stack.directory.appendingPathComponent("records")
        try FileManager.default.createDirectory(at: records, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: records.path)
        let examples = TestPaths.repositoryRoot.appendingPathComponent("Config/examples").path
        let worker = try ContainerImage.run(
            name: Self.name("replay"), environment: environment,
            options: ["-v", "\(examples):/demo:ro", "-v", "\(records.path):/records"],
            arguments: ["--replay", "/demo", "--simulator-record", "/records/pushes.jsonl"])

        try await waitFor("the late goal's dead letter", timeout: .seconds(90)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running container; \(worker.exitDescription)") }
            return worker.output.contains { $0.contains("dead letter activity-ended") } ? true : nil
        }
        let record = records.appendingPathComponent("pushes.jsonl")
        let tokens = RealBrokerEndToEndTests.owlTokens + [RealBrokerEndToEndTests.deliveryToken] + RealBrokerEndToEndTests.fanUpdateTokens
        let byToken = try await waitFor("the end push to every device", timeout: .seconds(60)) {
            let byToken = RealBrokerStack.pushesByToken(record)
            return tokens.allSatisfy { byToken[$0]?.last?.event == "end" } ? byToken : nil
        }
        for fan in RealBrokerEndToEndTests.fanPushToStartTokens {
            #expect(byToken[fan]?.map(\.event) == ["start"], "\(fan.prefix(8)): \(byToken[fan]?.map(\.event) ?? [])")
        }
        RealBrokerEndToEndTests.expectNoStartToUpdateTokens(byToken)
        #expect(byToken[RealBrokerEndToEndTests.deliveryToken]?.last?.contentState["status"] == "delivered")
        #expect(!worker.errors.contains { $0.contains("setsockopt") }, "\(worker.errors.filter { $0.contains("setsockopt") }.prefix(3))")

        #expect(try adminGet(port: adminPort, "/healthz")?.status == 200)
        let health = try ContainerImage.podman(["healthcheck", "run", worker.name])
        #expect(health.status == 0, "the image's HEALTHCHECK: \(health.standardOutput)\(health.standardError)")
        #expect(try await waitUntilReady(port: adminPort, timeout: .seconds(30)).ready == 200)
        let metrics = try #require(try adminGet(port: adminPort, "/metrics"))
        #expect(metrics.status == 200 && metrics.body.contains("livedispatch_"), "\(metrics.body.prefix(200))")

        let clock = ContinuousClock()
        let stopped = clock.now
        #expect(try await worker.process.stop(timeout: .seconds(20)) == 0, "\(worker.errors.suffix(8))")
        #expect(clock.now - stopped < .seconds(12), "drained in \(clock.now - stopped), beyond shutdown.timeout 10s")
    }

    @Test("the image's librdkafka over TLS: the broker's certificate verified against the CA mounted where the Deployment mounts it, the worker joins and is ready")
    func overTLS() async throws {
        let stack = try await TLSBrokerStack()
        let adminPort = try freePort()
        let caPath = "/var/run/secrets/livedispatch/kafka/ca.crt"
        var environment = shippedConfigurationOverrides(
            bootstrap: stack.bootstrap, group: "container-tls", partitions: stack.partitions, adminPort: adminPort)
        environment["LIVEDISPATCH_KAFKA_PROPERTIES_SECURITY_PROTOCOL"] = "SSL"
        environment["LIVEDISPATCH_KAFKA_PROPERTIES_SSL_CA_LOCATION"] = caPath
        let worker = try ContainerImage.run(
            name: Self.name("tls"), environment: environment, options: ["-v", "\(stack.certificateAuthority.path):\(caPath):ro"])
        try await waitFor("the container to be ready over TLS", timeout: .seconds(90)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running container; \(worker.exitDescription)") }
            return try WorkerReadiness.of(port: adminPort)?.ready == 200 ? true : nil
        }
        #expect(!worker.errors.contains { $0.contains("kafka.facility=FAIL") }, "\(worker.errors.filter { $0.contains("FAIL") }.prefix(3))")
        let status = try await worker.process.stop(timeout: .seconds(20))
        #expect(status == 0, "status \(status): \(worker.output.suffix(4)) \(worker.errors.suffix(8))")
    }

    @Test("two containers of the image, one with every capability dropped, share the partitions of one group")
    func twoContainersShareTheGroup() async throws {
        let stack = try await RealBrokerStack()
        let ports = [try freePort(), try freePort()]
        let workers = try [
            ContainerImage.run(name: Self.name("first"), environment: Self.environment(stack, group: "container-pair", adminPort: ports[0])),
            ContainerImage.run(
                name: Self.name("second"), environment: Self.environment(stack, group: "container-pair", adminPort: ports[1]),
                options: ["--cap-drop", "ALL"]),
        ]
        let shares = try await waitFor("the two containers to share the partitions", timeout: .seconds(90)) { () -> [[Int]]? in
            for worker in workers where !worker.isRunning {
                throw WaitTimeout(what: "a running container \(worker.name); \(worker.exitDescription)")
            }
            let readiness = try ports.compactMap { try WorkerReadiness.of(port: $0) }
            guard readiness.count == 2, readiness.allSatisfy({ $0.ready == 200 && $0.phase == "ready" }) else { return nil }
            let shares = readiness.map(\.partitions)
            return Set(shares[0]).isDisjoint(with: shares[1]) && (shares[0] + shares[1]).sorted() == Array(0..<stack.partitions)
                ? shares : nil
        }
        #expect(shares.allSatisfy { !$0.isEmpty }, "\(shares)")
        for worker in workers {
            #expect(try await worker.process.stop(timeout: .seconds(20)) == 0, "\(worker.name): \(worker.errors.suffix(8))")
        }
    }
}
