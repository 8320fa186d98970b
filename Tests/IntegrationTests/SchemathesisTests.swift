import Foundation
import Testing

/// schemathesis (installed by scripts/bootstrap under .build/) generates
/// requests from the document a running worker serves at /v1/openapi.json,
/// valid and invalid, and checks that none gets a 5xx and that every answer
/// matches the document: status, content type, headers, body schema.
/// (Its `coverage` phase is left out: with schemathesis 4.32.5 on Python 3.11
/// it stops with an internal error in hypothesis while describing a filter.)
@Suite("Ingest API contract")
struct SchemathesisTests {
    static let executable = TestPaths.repositoryRoot.appendingPathComponent(".build/venv/bin/schemathesis")

    @Test("schemathesis finds no 5xx and no answer outside the schema")
    func contract() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable.path) else {
            Issue.record("schemathesis is not installed at \(Self.executable.path); run scripts/bootstrap")
            return
        }
        let stack = try await WorkerStack(partitions: 2)
        let (port, worker) = try await stack.startHTTPWorker(extra: IngestAPITests.http(rateLimit: 100_000, burst: 100_000))
        let report = stack.directory.appendingPathComponent("schemathesis")
        let result = try runProcess(
            [
                "run", "http://127.0.0.1:\(port)/v1/openapi.json",
                "--header", "Authorization: Bearer \(IngestAPITests.operatorKey)",
                "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance",
                "--phases", "examples,fuzzing",
                "--max-examples", "40", "--seed", "1", "--workers", "2", "--request-timeout", "20",
                "--report", "junit", "--report-dir", report.path,
            ],
            executable: Self.executable, currentDirectory: stack.directory, environment: ["NO_COLOR": "1"])
        #expect(result.status == 0, "schemathesis failed:\n\(result.standardOutput.suffix(6000))\n\(result.standardError.suffix(2000))")
        #expect(worker.isRunning)
        #expect(try await worker.stop() == 0)
    }
}
