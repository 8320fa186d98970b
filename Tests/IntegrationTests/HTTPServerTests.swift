import Foundation
import LiveDispatchCore
import Testing

/// The worker's HTTP server against a real `livedispatch run`: the health
/// routes as before, and the limits that keep hostile clients from
/// exhausting it (issue 9, defect 5).
@Suite("HTTP server limits", .serialized)
struct HTTPServerTests {
    @Test("/healthz, /readyz, /metrics and /status answer as before; other paths are 404; GET bodies are refused")
    func healthRoutes() async throws {
        let stack = try await WorkerStack(partitions: 2)
        let (port, worker) = try await stack.startHTTPWorker(extra: "http:\n  idle_timeout: 30s\n")
        let health = try httpRequest("GET", port: port, "/healthz")
        #expect(health.status == 200 && health.body == "ok\n" && health.headers["content-type"] == "text/plain")
        let ready = try await waitFor("/readyz to say ready") {
            let answer = try httpRequest("GET", port: port, "/readyz")
            return answer.status == 200 ? answer : nil
        }
        #expect(ready.body == "ready\n")
        let status = try httpRequest("GET", port: port, "/status")
        #expect(status.headers["content-type"] == "application/json")
        let document = try JSONValue.parse(status.body)
        #expect(document["partitions"]?.arrayValue?.count == 2)
        #expect(document["ready"] == .bool(true) && document["paused"] == .bool(false))
        let metrics = try httpRequest("GET", port: port, "/metrics")
        #expect(metrics.status == 200 && metrics.headers["content-type"] == "text/plain; version=0.0.4")
        #expect(metrics.body.contains("livedispatch_"))
        // The process series Prometheus's client libraries export, as an SRE's dashboards expect them.
        func sample(_ name: String) -> Double? {
            metrics.body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(metrics.body.contains("# TYPE process_cpu_seconds_total counter"))
        #expect((sample("process_cpu_seconds_total") ?? 0) > 0)
        #expect((sample("process_resident_memory_bytes") ?? 0) > 10_000_000)
        #expect((sample("process_open_fds") ?? 0) > 3)
        #expect((sample("process_max_fds") ?? 0) >= (sample("process_open_fds") ?? 0))
        #expect(abs((sample("process_start_time_seconds") ?? 0) - Date().timeIntervalSince1970) < 600)
        #expect(try httpRequest("GET", port: port, "/nothing-here").status == 404)
        let withBody = try httpRequest("GET", port: port, "/healthz", body: "surprise")
        #expect(withBody.status == 400)
        #expect(try JSONValue.parse(withBody.body)["error"] == "invalid-request")
        #expect(try await worker.stop() == 0)
    }

    @Test("a full listener closes the connection idle longest to let the next one in; a crowd holds no descriptor of the worker")
    func connectionCap() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let idle = 2.0
        let (port, worker) = try await stack.startHTTPWorker(extra: """
            http:
              max_connections: 3
              idle_timeout: \(Int(idle))s
              header_timeout: 60s
            """)
        // Three kept-alive connections, each answered once, then idle: the
        // third fills the listener, so the one idle longest is closed.
        var held: [RawConnection] = []
        for _ in 0..<3 {
            let connection = try RawConnection(port: port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            #expect(try await connection.waitForResponse(timeout: .seconds(20)).hasPrefix("HTTP/1.1 200"))
            held.append(connection)
        }
        let lastAnswered = ContinuousClock.now
        try await held[0].waitUntilClosed(timeout: .seconds(5))
        let baseline = openDescriptors(worker.processIdentifier)
        // The fourth request is served at once, long before the idle timeout would free a slot...
        let fourth = try RawConnection(port: port)
        fourth.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        let response = try await fourth.waitForResponse(timeout: .seconds(30))
        let waited = ContinuousClock.now - lastAnswered
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(waited < .seconds(idle * 0.75), "answered after \(waited): it waited for an idle timeout")
        try await held[1].waitUntilClosed(timeout: .seconds(5))
        // ...and a crowd behind it makes room for itself the same way.
        let crowd = try (0..<100).map { _ in try RawConnection(port: port) }
        for connection in held.dropFirst(2) + [fourth] { try await connection.waitUntilClosed(timeout: .seconds(5)) }
        // The crowd never became the worker's descriptors: at most three connections at a time.
        let descriptors = openDescriptors(worker.processIdentifier)
        #expect(descriptors <= baseline + 10, "the worker holds \(descriptors) descriptors, \(baseline) with three connections")
        #expect(crowd.count == 100)
        #expect(try await worker.stop() == 0)
    }

    @Test("clients too slow with a request's head or body are cut off, while the idle timeout is far away")
    func timeouts() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let (port, worker) = try await stack.startHTTPWorker(extra: """
            http:
              idle_timeout: 60s
              header_timeout: 1s
              request_timeout: 1s
            """)
        let silent = try RawConnection(port: port)
        try await silent.waitUntilClosed(timeout: .seconds(15))

        // A byte at a time, never finishing the head.
        let slow = try RawConnection(port: port)
        slow.send("GET /healthz HTTP/1.1\r\n")
        _ = try await waitFor("the slow client to be cut off", timeout: .seconds(15)) { () -> Bool? in
            if case .closed = slow.readNow() { return true }
            return slow.send("X") ? nil : true
        }
        // So is a body that trickles in for longer than the request timeout.
        let stalled = try RawConnection(port: port)
        stalled.send("POST /healthz HTTP/1.1\r\nHost: test\r\nContent-Length: 10000\r\n\r\n")
        _ = try await waitFor("the slow body to be cut off", timeout: .seconds(15)) { () -> Bool? in
            if case .closed = stalled.readNow() { return true }
            return stalled.send("a") ? nil : true
        }
        #expect(try httpRequest("GET", port: port, "/healthz").status == 200)
        #expect(try await worker.stop() == 0)
    }
}
