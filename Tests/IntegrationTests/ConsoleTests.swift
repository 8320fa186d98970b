import Crypto
import Foundation
import Testing

/// The web console in headless Chromium (Debian's `chromium`, driven by
/// playwright from scripts/bootstrap's venv): `livedispatch run` replays the
/// demo as `make run` does, keeps running, and prints the console's address
/// and each activity's Lock Screen; scripts/console-check.py then checks the
/// console shows the same Lock Screens, runs the rule playground, replays a
/// dead letter with the button and sees it land, and saves screenshots
/// (under docs/, which the README shows, when CONSOLE_SCREENSHOTS=docs).
@Suite("Web console")
struct ConsoleTests {
    static let python = TestPaths.repositoryRoot.appendingPathComponent(".build/venv/bin/python3")
    static let chromium = "/usr/bin/chromium"
    static let adminKey = "console-admin-key-for-tests"

    /// Config/livedispatch.yaml with the HTTP server on a free port and one key with every scope.
    static func configuration(in directory: URL) throws -> String {
        var text = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("Config/livedispatch.yaml"), encoding: .utf8)
        let hash = SHA256.hash(data: Array(adminKey.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        for (old, new) in [
            ("listen: 127.0.0.1:9464", "listen: 127.0.0.1:0"),
            ("api_keys: []", "api_keys:\n    - name: operator\n      sha256: \(hash)\n      scopes: [ingest, read, admin]"),
        ] {
            guard text.contains(old) else { throw WaitTimeout(what: "\(old.debugDescription) in Config/livedispatch.yaml") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        let file = directory.appendingPathComponent("livedispatch.yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    @Test("the console shows the demo's activities and Lock Screens, explains rules and replays a dead letter")
    func console() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium),
              (try? runProcess(["-c", "import playwright"], executable: Self.python))?.status == 0
        else {
            Issue.record("chromium (\(Self.chromium)) or playwright (in \(Self.python.path)) is missing; run scripts/bootstrap")
            return
        }
        let directory = try TestPaths.temporaryDirectory("console")
        let worker = try BackgroundProcess(
            ["run", "--config", try Self.configuration(in: directory), "--replay", "Config/examples"],
            currentDirectory: TestPaths.repositoryRoot)
        let consoleLine = try await worker.waitForLine(timeout: .seconds(90)) { $0.hasPrefix("console: http://127.0.0.1:") }
        let url = String(consoleLine.dropFirst("console: ".count))

        // The replay ends both activities; their last Lock Screen lines are
        // what the console must show.
        let demo = ["match-superb-owl-2026", "order-A-1001"]
        let lockScreens = try await waitFor("the demo's activities to end", timeout: .seconds(90)) { () -> [String: String]? in
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            var last: [String: String] = [:]
            for line in worker.standardOutputLines {
                guard let range = line.range(of: "🔒 ") else { continue }
                let parts = line[range.upperBound...].split(separator: " ", maxSplits: 1)
                guard parts.count == 2 else { continue }
                last[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
            }
            let ended = demo.compactMap { last[$0] }.filter { $0.hasSuffix(" [ended]") }
            return ended.count == demo.count ? last.mapValues { $0.replacingOccurrences(of: " [ended]", with: "") } : nil
        }
        #expect(worker.isRunning, "without --exit-after-replay the worker keeps running after the replay")

        var arguments = [
            TestPaths.repositoryRoot.appendingPathComponent("scripts/console-check.py").path,
            "--url", url, "--admin-key", Self.adminKey, "--chromium", Self.chromium,
            // The screenshots the README shows are refreshed with
            // CONSOLE_SCREENSHOTS=docs; otherwise they stay in the test's directory.
            "--screenshots", ProcessInfo.processInfo.environment["CONSOLE_SCREENSHOTS"].map {
                URL(fileURLWithPath: $0, relativeTo: TestPaths.repositoryRoot).path
            } ?? directory.appendingPathComponent("screenshots").path,
        ]
        for activity in demo { arguments += ["--expect", "\(activity)=\(lockScreens[activity] ?? "")"] }
        let check = try runProcess(arguments, executable: Self.python, currentDirectory: directory)
        #expect(check.status == 0, "console-check failed:\n\(check.standardOutput.suffix(3000))\n\(check.standardError.suffix(3000))")
        #expect(check.standardOutput.contains("console-check: all checks passed"))
        #expect(try await worker.stop() == 0)
    }
}
