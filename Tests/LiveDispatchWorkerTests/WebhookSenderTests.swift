import APNsSimulator
import Foundation
import LiveDispatchCore
import LiveDispatchTracing
import Logging
import MetricsTestKit
import NIOSSL
import ServiceLifecycleTestKit
import Testing
import TestSupport

@testable import LiveDispatchWorker

@Suite("Webhook sender", .serialized)
struct WebhookSenderTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    static func sender(
        url: String, metrics: TestMetrics, timeout: Duration = .seconds(5), queue: WebhookQueue.Configuration,
        trustRoots: [NIOSSLCertificate] = []
    ) throws -> WebhookSender {
        let endpoint = try #require(HTTP1Client.Endpoint(url: url))
        return try WebhookSender(
            endpoint: endpoint, signer: try WebhookSigner(secret: secret), timeout: timeout, queue: queue, trustRoots: trustRoots,
            logger: Logger(label: "webhook-tests"), metrics: metrics)
    }

    static func counter(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (try? metrics.expectCounter(label, dimensions).totalValue) ?? -1
    }

    static func outcome(_ index: Int) -> (id: String, body: [UInt8]) {
        let id = "outcome-\(index)"
        return (id, Array(#"{"id":"\#(id)","kind":"push_completed","version":\#(index),"text":"é ✓"}"#.utf8))
    }

    @Test("every outcome arrives once, as JSON, with a signature Python's hmac accepts")
    func everyOutcomeArrivesSigned() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret)
        let metrics = TestMetrics()
        let sender = try Self.sender(url: "http://127.0.0.1:\(receiver.port)/hooks/outcomes", metrics: metrics, queue: .init(concurrency: 4))
        for index in 0..<40 {
            let outcome = Self.outcome(index)
            sender.deliver(id: outcome.id, body: outcome.body)
        }
        try await waitUntil("40 outcomes delivered", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhooks_total", [("result", "delivered")]) == 40
        }
        let requests = try receiver.requests()
        #expect(requests.count == 40)
        #expect(Set(requests.map(\.id)) == Set((0..<40).map { Self.outcome($0).id }))
        #expect(requests.allSatisfy { $0.signature_valid })
        #expect(requests.allSatisfy { $0.content_type == "application/json" })
        for request in requests {
            let index = try #require(Int(request.id.dropFirst("outcome-".count)))
            #expect(Array(request.body.utf8) == Self.outcome(index).body)
        }
        #expect(Self.counter(metrics, "livedispatch_webhook_retries_total") == 0)
        #expect(try metrics.expectGauge("livedispatch_webhook_queue").lastValue == 0)
        await sender.shutdown()
        try await receiver.stop()
    }

    @Test("a receiver answering 503, then 200, gets the outcome again and it is delivered once")
    func retriedThenDelivered() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--fail-first", "2", "--fail-status", "503", "--retry-after", "0"])
        let metrics = TestMetrics()
        let sender = try Self.sender(
            url: "http://127.0.0.1:\(receiver.port)/", metrics: metrics,
            queue: .init(maxAttempts: 5, backoff: Backoff(base: 0.05, cap: 0.2)))
        sender.deliver(id: "outcome-503", body: Array(#"{"ok":true}"#.utf8))
        try await waitUntil("the outcome delivered", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhooks_total", [("result", "delivered")]) == 1
        }
        let requests = try receiver.requests()
        #expect(requests.map(\.answered) == [503, 503, 204])
        #expect(requests.allSatisfy { $0.id == "outcome-503" && $0.signature_valid })
        #expect(Self.counter(metrics, "livedispatch_webhook_retries_total") == 2)
        #expect(sender.queued == 0)
        await sender.shutdown()
        try await receiver.stop()
    }

    @Test("a 410 is not retried: the outcome is dropped as rejected")
    func goneIsRejected() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--fail-first", "99", "--fail-status", "410"])
        let metrics = TestMetrics()
        let sender = try Self.sender(url: "http://127.0.0.1:\(receiver.port)/", metrics: metrics, queue: .init())
        sender.deliver(id: "outcome-410", body: Array("{}".utf8))
        try await waitUntil("the outcome rejected", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "rejected")]) == 1
        }
        #expect(try receiver.requests().count == 1)
        await sender.shutdown()
        try await receiver.stop()
    }

    @Test("a receiver that never answers does not slow deliver; its outcomes time out, are retried, and dropped and counted")
    func hangingReceiver() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--hang"])
        let metrics = TestMetrics()
        let timeout = Duration.milliseconds(400)
        let sender = try Self.sender(
            url: "http://127.0.0.1:\(receiver.port)/", metrics: metrics, timeout: timeout,
            queue: .init(capacity: 6, concurrency: 3, maxAttempts: 2, backoff: Backoff(base: 0.05, cap: 0.1)))
        let clock = ContinuousClock()
        var slowest = Duration.zero
        for index in 0..<50 {
            let outcome = Self.outcome(index)
            let started = clock.now
            sender.deliver(id: outcome.id, body: outcome.body)
            slowest = max(slowest, clock.now - started)
        }
        // A send waiting for its answer would take the whole timeout.
        #expect(slowest < timeout / 2, "deliver took \(slowest)")
        try await waitUntil("44 outcomes dropped as queue-full", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "queue-full")]) == 44
        }
        try await waitUntil("6 outcomes given up after 2 attempts", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "attempts-exhausted")]) == 6
        }
        #expect(Self.counter(metrics, "livedispatch_webhook_retries_total") == 6)
        #expect(Self.counter(metrics, "livedispatch_webhooks_total", [("result", "delivered")]) == 0)
        #expect(try metrics.expectGauge("livedispatch_webhook_queue").lastValue == 0)
        let requests = try await waitFor("12 requests at the receiver", timeout: .seconds(30)) { () -> [WebhookReceiver.Request]? in
            let requests = try receiver.requests()
            return requests.count >= 12 ? requests : nil
        }
        #expect(requests.count == 12)
        #expect(requests.allSatisfy { $0.signature_valid })
        // Still not slowed once its queue has room again.
        let started = clock.now
        sender.deliver(id: "late", body: Array("{}".utf8))
        #expect(clock.now - started < timeout / 2)
        await sender.shutdown()
        try await receiver.stop()
    }

    @Test("shutdown drops what waits, counts it, and returns once the requests in flight ended")
    func shutdownDrops() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--hang"])
        let metrics = TestMetrics()
        let sender = try Self.sender(
            url: "http://127.0.0.1:\(receiver.port)/", metrics: metrics, timeout: .milliseconds(300),
            queue: .init(capacity: 10, concurrency: 2, maxAttempts: 5))
        for index in 0..<5 { sender.deliver(id: "outcome-\(index)", body: Array("{}".utf8)) }
        try await waitUntil("two requests at the receiver", timeout: .seconds(30)) { try receiver.requests().count == 2 }
        await sender.shutdown()
        #expect(sender.queued == 0)
        #expect(Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "shutdown")]) == 5)
        sender.deliver(id: "after", body: [])
        try await waitUntil("the outcome delivered after shutdown dropped", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "shutdown")]) == 6
        }
        try await receiver.stop()
    }

    @Test("as a service it runs until the graceful shutdown, then drops what waits and ends once the request in flight did")
    func asAService() async throws {
        let receiver = try await WebhookReceiver(secret: Self.secret, arguments: ["--hang"])
        let metrics = TestMetrics()
        let sender = try Self.sender(
            url: "http://127.0.0.1:\(receiver.port)/", metrics: metrics, timeout: .milliseconds(300),
            queue: .init(capacity: 10, concurrency: 1, maxAttempts: 5))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await sender.run() }
                sender.deliver(id: "in-flight", body: Array("{}".utf8))
                sender.deliver(id: "waiting", body: Array("{}".utf8))
                try await waitUntil("one request at the receiver", timeout: .seconds(30)) { try receiver.requests().count == 1 }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(Self.counter(metrics, "livedispatch_webhook_drops_total", [("reason", "shutdown")]) == 2)
        #expect(Self.counter(metrics, "livedispatch_webhook_retries_total") == 0)
        #expect(sender.queued == 0)
        try await receiver.stop()
    }

    @Test("https: the receiver's certificate is checked against the extra CA, and outcomes arrive signed")
    func https() async throws {
        let directory = try TestPaths.temporaryDirectory("webhook-tls")
        let certificate = try SimulatorCertificate.generate(commonName: "webhook receiver")
        let certificatePath = directory.appendingPathComponent("cert.pem")
        let keyPath = directory.appendingPathComponent("key.pem")
        try certificate.certificatePEM.write(to: certificatePath, atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(to: keyPath, atomically: true, encoding: .utf8)
        let receiver = try await WebhookReceiver(
            secret: Self.secret, arguments: ["--tls-cert", certificatePath.path, "--tls-key", keyPath.path])
        let roots = try NIOSSLCertificate.fromPEMBytes(Array(certificate.certificatePEM.utf8))

        let metrics = TestMetrics()
        let sender = try Self.sender(url: "https://localhost:\(receiver.port)/", metrics: metrics, queue: .init(), trustRoots: roots)
        sender.deliver(id: "outcome-tls", body: Array(#"{"tls":true}"#.utf8))
        try await waitUntil("the outcome delivered over TLS", timeout: .seconds(30)) {
            Self.counter(metrics, "livedispatch_webhooks_total", [("result", "delivered")]) == 1
        }
        #expect(try receiver.requests().map(\.signature_valid) == [true])
        await sender.shutdown()

        // Without the CA the server is not trusted: nothing arrives, the attempts fail.
        let untrusting = TestMetrics()
        let refused = try Self.sender(
            url: "https://localhost:\(receiver.port)/", metrics: untrusting,
            queue: .init(maxAttempts: 2, backoff: Backoff(base: 0.05, cap: 0.1)))
        refused.deliver(id: "outcome-untrusted", body: Array("{}".utf8))
        try await waitUntil("the untrusted attempts given up", timeout: .seconds(30)) {
            Self.counter(untrusting, "livedispatch_webhook_drops_total", [("reason", "attempts-exhausted")]) == 1
        }
        #expect(try receiver.requests().count == 1)
        await refused.shutdown()
        try await receiver.stop()
    }
}
