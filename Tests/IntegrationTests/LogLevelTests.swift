import Foundation
import Testing

/// `livedispatch run --log-level`, as a process.
@Suite("livedispatch run log levels")
struct LogLevelTests {
    @Test("--log-level trace shows each routed event and each APNs answer; debug does not")
    func trace() throws {
        let root = TestPaths.repositoryRoot
        let arguments = ["run", "--config", "Config/livedispatch.yaml", "--replay", "Config/examples", "--exit-after-replay"]
        let traced = try runProcess(arguments + ["--log-level", "trace"], currentDirectory: root, environment: ["LIVEDISPATCH_ADMIN_LISTEN": ""])
        #expect(traced.status == 0, "\(traced.standardError.suffix(2000))")
        let traceLines = traced.standardError.split(separator: "\n").filter { $0.contains(" trace ") }
        #expect(traceLines.contains { $0.contains("Event routed") && $0.contains("kafka.source=sports.scores") })
        #expect(traceLines.contains { $0.contains("APNs answered a push") && $0.contains("apns.outcome=delivered") })

        let debug = try runProcess(arguments + ["--log-level", "debug"], currentDirectory: root, environment: ["LIVEDISPATCH_ADMIN_LISTEN": ""])
        #expect(debug.status == 0)
        #expect(!debug.standardError.contains(" trace "))
        #expect(!debug.standardError.contains("Event routed"))
    }

    @Test("an unknown log level is refused, not taken for info")
    func unknownLevel() throws {
        let result = try runProcess(["run", "--config", "Config/livedispatch.yaml", "--log-level", "verbose"], currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 64)
        #expect(result.standardError.contains("--log-level: expected trace, debug, info, notice, warning, error or critical, got \"verbose\""))
    }
}
