import Foundation
import LiveDispatchCore
import Testing

/// `livedispatch-bench http-attack` against a real worker: every probe of
/// the attack suite holds, and the probe listener answers `/healthz` within
/// 100 ms while 2,000 idle connections hold the main listener.
@Suite("HTTP attack suite", .serialized)
struct HTTPAttackTests {
    static let keys = ["ingest": "attack-ingest-key", "read": "attack-read-key", "admin": "attack-admin-key"]

    @Test("every probe of bench http-attack holds against a worker, idle flood included")
    func attackSuite() async throws {
        let stack = try await WorkerStack(partitions: 2)
        let probePort = try freePort()
        let keys = Self.keys.sorted { $0.key < $1.key }.map { scope, secret in
            "    - name: \(scope)\n      sha256: \(IngestAPITests.hash(secret))\n      scopes: [\(scope)]"
        }.joined(separator: "\n")
        let (port, worker) = try await stack.startHTTPWorker(extra: """
            http:
              header_timeout: 4s
              rate_limit: 5
              rate_burst: 300
              api_keys:
            \(keys)
            """, probePort: probePort)
        let result = try runBench([
            "http-attack", "--port", String(port), "--probe-port", String(probePort),
            "--ingest-key", Self.keys["ingest"] ?? "", "--read-key", Self.keys["read"] ?? "", "--admin-key", Self.keys["admin"] ?? "",
            "--idle-connections", "2000", "--header-timeout", "4", "--rate-burst", "300",
        ])
        let lines = result.standardOutput.split(separator: "\n")
        #expect(result.status == 0, "failed probes:\n\(lines.filter { $0.hasSuffix("FAILED") }.joined(separator: "\n"))\n\(result.standardError)")
        // One row per route and attempt, the spellings, the bodies, the flood: well over fifty probes, all passed.
        let summary = lines.last { $0.hasPrefix("http-attack:") } ?? ""
        #expect(summary.hasSuffix("0 failed"), "\(summary)")
        #expect(lines.filter { $0.hasSuffix(" ok") }.count >= 50)
        let flood = lines.filter { $0.contains("idle connections") }
        #expect(flood.contains { $0.contains("admin.probe_listen with 2000 idle connections") && $0.hasSuffix(" ok") }, "\(flood)")
        #expect(try await worker.stop() == 0)
    }
}
