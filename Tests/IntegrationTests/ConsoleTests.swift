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
    static let readKey = "console-read-key-for-tests"

    static func sha256(_ key: String) -> String {
        SHA256.hash(data: Array(key.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Config/livedispatch.yaml with the HTTP server on a free port of
    /// `host`, one key with every scope and one with `read` only.
    static func configuration(in directory: URL, host: String) throws -> String {
        var text = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("Config/livedispatch.yaml"), encoding: .utf8)
        let keys = """
            api_keys:
                - name: operator
                  sha256: \(sha256(adminKey))
                  scopes: [ingest, read, admin]
                - name: viewer
                  sha256: \(sha256(readKey))
                  scopes: [read]
            """
        for (old, new) in [("listen: 127.0.0.1:9464", "listen: \(host):0"), ("api_keys: []", keys)] {
            guard text.contains(old) else { throw WaitTimeout(what: "\(old.debugDescription) in Config/livedispatch.yaml") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        let file = directory.appendingPathComponent("livedispatch.yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Whether chromium and playwright are there; records an issue when not.
    static func browserIsInstalled() -> Bool {
        guard FileManager.default.isExecutableFile(atPath: chromium),
              (try? runProcess(["-c", "import playwright"], executable: python))?.status == 0
        else {
            Issue.record("chromium (\(chromium)) or playwright (in \(python.path)) is missing; run scripts/bootstrap")
            return false
        }
        return true
    }

    /// A worker replaying the demo as `make run` does, its console's
    /// address, and each demo activity's last Lock Screen once both ended.
    static func demoWorker(host: String, in directory: URL) async throws -> (BackgroundProcess, url: String, lockScreens: [String: String]) {
        let worker = try BackgroundProcess(
            ["run", "--config", try configuration(in: directory, host: host), "--replay", "Config/examples"],
            currentDirectory: TestPaths.repositoryRoot)
        let consoleLine = try await worker.waitForLine(timeout: .seconds(90)) { $0.hasPrefix("console: http://127.0.0.1:") }
        let url = String(consoleLine.dropFirst("console: ".count))

        // The replay ends both activities; their last Lock Screen lines are
        // what the console must show.
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
        return (worker, url, lockScreens)
    }

    static let demo = ["match-superb-owl-2026", "order-A-1001"]

    /// Runs scripts/console-check.py with `arguments` and the demo's Lock Screens.
    static func consoleCheck(_ arguments: [String], lockScreens: [String: String], in directory: URL) throws {
        var arguments = [TestPaths.repositoryRoot.appendingPathComponent("scripts/console-check.py").path, "--chromium", chromium] + arguments + [
            // The screenshots the README shows are refreshed with
            // CONSOLE_SCREENSHOTS=docs; otherwise they stay in the test's directory.
            "--screenshots", ProcessInfo.processInfo.environment["CONSOLE_SCREENSHOTS"].map {
                URL(fileURLWithPath: $0, relativeTo: TestPaths.repositoryRoot).path
            } ?? directory.appendingPathComponent("screenshots").path,
        ]
        for activity in demo { arguments += ["--expect", "\(activity)=\(lockScreens[activity] ?? "")"] }
        let check = try runProcess(arguments, executable: python, currentDirectory: directory)
        #expect(check.status == 0, "console-check failed:\n\(check.standardOutput.suffix(3000))\n\(check.standardError.suffix(3000))")
        #expect(check.standardOutput.contains("console-check: all checks passed"))
    }

    @Test("the console shows the demo's activities and Lock Screens, explains rules and replays a dead letter")
    func console() async throws {
        guard Self.browserIsInstalled() else { return }
        let directory = try TestPaths.temporaryDirectory("console")
        let (worker, url, lockScreens) = try await Self.demoWorker(host: "127.0.0.1", in: directory)
        #expect(worker.isRunning, "without --exit-after-replay the worker keeps running after the replay")
        try Self.consoleCheck(["--url", url, "--admin-key", Self.adminKey], lockScreens: lockScreens, in: directory)
        #expect(try await worker.stop() == 0)
    }

    /// This machine's first IPv4 address that is not loopback (`hostname -I`).
    static func nonLoopbackAddress() throws -> String? {
        let result = try runProcess(["-I"], executable: URL(fileURLWithPath: "/usr/bin/hostname"))
        return result.standardOutput.split(whereSeparator: \.isWhitespace).map(String.init).first {
            $0.contains(".") && !$0.hasPrefix("127.")
        }
    }

    @Test("bound to 0.0.0.0 and opened through a non-loopback address, the console asks for a key and refuses a wrong one")
    func keyPrompt() async throws {
        guard Self.browserIsInstalled() else { return }
        guard let address = try Self.nonLoopbackAddress() else {
            Issue.record("this machine has no non-loopback IPv4 address (hostname -I), so a server not bound to localhost cannot be reached")
            return
        }
        let directory = try TestPaths.temporaryDirectory("console-key")
        let (worker, url, lockScreens) = try await Self.demoWorker(host: "0.0.0.0", in: directory)
        let port = try #require(URL(string: url)?.port)
        try Self.consoleCheck(["--url", "http://\(address):\(port)/", "--read-key", Self.readKey], lockScreens: lockScreens, in: directory)
        #expect(try await worker.stop() == 0)
    }
}
