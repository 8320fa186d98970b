import Foundation
import LiveDispatchCore
import Testing

/// `livedispatch-bench http-attack` against a real worker: every probe of
/// the attack suite holds, the probe listener answers `/healthz` within
/// 100 ms while 2,000 idle connections are begun on the main listener, and
/// the main listener stays fair: an honest client on 127.0.0.1 is answered
/// while 127.0.0.2 reopens half-open sockets and holds idle ones, and
/// keyless slow bodies leave the worker's memory where it was.
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
              max_connections_per_address: 32
              api_keys:
            \(keys)
            """, probePort: probePort)
        let result = try runBench([
            "http-attack", "--port", String(port), "--probe-port", String(probePort),
            "--ingest-key", Self.keys["ingest"] ?? "", "--read-key", Self.keys["read"] ?? "", "--admin-key", Self.keys["admin"] ?? "",
            "--idle-connections", "2000", "--header-timeout", "4", "--rate-burst", "300",
            // Smaller than the benchmark's 1,000 + 1,500 and 100 tries, on a debug build beside other work;
            // the bound checks the honest client is served (without the per-address cap it waited 20 s), the
            // 200 ms target is the benchmark's (RELIABILITY.md).
            "--half-open", "300", "--fairness-idle", "400", "--tries", "30", "--within-ms", "3000",
            "--slow-bodies", "300", "--worker-pid", String(worker.processIdentifier),
        ])
        let lines = result.standardOutput.split(separator: "\n")
        #expect(result.status == 0, "failed probes:\n\(lines.filter { $0.hasSuffix("FAILED") }.joined(separator: "\n"))\n\(result.standardError)")
        // One row per route and attempt, the spellings, the bodies, the flood: well over fifty probes, all passed.
        let summary = lines.last { $0.hasPrefix("http-attack:") } ?? ""
        #expect(summary.hasSuffix("0 failed"), "\(summary)")
        #expect(lines.filter { $0.hasSuffix(" ok") }.count >= 50)
        let flood = lines.filter { $0.contains("idle connections") }
        #expect(flood.contains { $0.contains("admin.probe_listen with 2000 idle connections") && $0.hasSuffix(" ok") }, "\(flood)")
        for probe in ["Expect: 100-continue without a key", "keyless 255 KB slow bodies", "GET /healthz on admin.listen, 300 half-open", "authorized update on admin.listen, 300 half-open"] {
            #expect(lines.contains { $0.contains(probe) && $0.hasSuffix(" ok") }, "\(probe): \(lines.filter { $0.contains(probe) })")
        }
        #expect(try await worker.stop() == 0)
    }
}
