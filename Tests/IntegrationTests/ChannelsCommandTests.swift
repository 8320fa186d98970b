import Foundation
import LiveDispatchCore
import Testing

/// `livedispatch channels …` as a process against `livedispatch simulate
/// apns` as a process, over TLS, with the key and trust roots of a worker
/// configuration.
@Suite("livedispatch channels against a simulator process")
struct ChannelsCommandTests {
    static let teamID = "TEAM000002"
    static let keyID = "KEY0000002"
    static let bundleID = "com.example.channels"

    /// A simulator process allowing `channelLimit` channels, and a configuration file pointing at it.
    func withSimulator(channelLimit: Int, _ body: (_ configuration: String, _ directory: URL, _ port: Int) async throws -> Void) async throws {
        let directory = try TestPaths.temporaryDirectory("channels-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("key.p8").path
        let generated = try runProcess(["simulate", "apns", "--generate-key", key])
        #expect(generated.status == 0)
        let certificate = directory.appendingPathComponent("sim.pem").path
        let simulator = try BackgroundProcess([
            "simulate", "apns", "--port", "0", "--team-id", Self.teamID, "--key-id", Self.keyID, "--key", key,
            "--bundle-id", Self.bundleID, "--cert-out", certificate, "--threads", "1",
            "--channel-limit", String(channelLimit), "--record", directory.appendingPathComponent("pushes.jsonl").path,
        ])
        let listening = try await simulator.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("listening: ") }
        let port = listening.split(separator: ":").last.map(String.init) ?? ""
        let configuration = directory.appendingPathComponent("livedispatch.yaml").path
        try Data("""
            apns:
              endpoint: 127.0.0.1:\(port)
              environment: sandbox
              bundle_id: \(Self.bundleID)
              team_id: \(Self.teamID)
              key_id: \(Self.keyID)
              key_path: \(key)
              trust_roots: [\(certificate)]
            """.utf8).write(to: URL(fileURLWithPath: configuration))
        do {
            try await body(configuration, directory, Int(port) ?? 0)
        } catch {
            _ = try? await simulator.stop()
            throw error
        }
        _ = try await simulator.stop()
    }

    func channels(_ arguments: [String], configuration: String) throws -> ProcessResult {
        try runProcess(["channels"] + arguments + ["--config", configuration])
    }

    @Test("create prints an id, list and get show it, delete removes it; the limit and unknown ids fail clearly")
    func lifecycle() async throws {
        try await withSimulator(channelLimit: 2) { configuration, directory, port in
            let first = try channels(["create", "--storage-policy", "most-recent"], configuration: configuration)
            #expect(first.status == 0, "\(first.standardError)")
            let firstID = first.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!firstID.isEmpty)
            let second = try channels(["create", "--storage-policy", "0", "--environment", "sandbox"], configuration: configuration)
            let secondID = second.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(second.status == 0 && secondID != firstID)

            let listed = try channels(["list"], configuration: configuration)
            #expect(listed.standardOutput.split(separator: "\n").map(String.init) == [firstID, secondID])
            // A broadcast to the new channel (nghttp, a token from the simulator's --print-token) is counted for it.
            let jwt = try runProcess([
                "simulate", "apns", "--print-token", "--team-id", Self.teamID, "--key-id", Self.keyID,
                "--key", directory.appendingPathComponent("key.p8").path,
            ]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            let sent = try await nghttp(
                port: port, path: "/4/broadcasts/apps/\(Self.bundleID)",
                headers: [
                    (":method", "POST"), ("authorization", "bearer \(jwt)"), ("apns-push-type", "liveactivity"),
                    ("apns-channel-id", firstID), ("apns-priority", "10"), ("apns-expiration", "1764003600"),
                ],
                body: #"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"home":1}}}"#,
                certificateFile: directory.appendingPathComponent("sim.pem"), directory: directory)
            #expect(sent.statuses.values.contains(200), "\(sent.errors)")
            let recorded = try await waitFor("the broadcast in the record file", timeout: .seconds(30)) {
                recordedPushes(directory.appendingPathComponent("pushes.jsonl")).first { $0.value["channel"]?.stringValue == firstID }
            }
            #expect(recorded.event == "update")
            #expect(recorded.token.isEmpty)

            let read = try channels(["get", firstID], configuration: configuration)
            let info = try JSONValue.parse(read.standardOutput)
            #expect(info["message_storage_policy"]?.integerValue == 1)
            #expect(info["channel_id"]?.stringValue == firstID)

            let third = try channels(["create"], configuration: configuration)
            #expect(third.status != 0)
            #expect(third.standardError.contains("CannotCreateChannelConfig"))
            #expect(third.standardError.contains("too many channels"))

            let deleted = try channels(["delete", firstID], configuration: configuration)
            #expect(deleted.status == 0, "\(deleted.standardError)")
            #expect(try channels(["list"], configuration: configuration).standardOutput.split(separator: "\n").map(String.init) == [secondID])
            let again = try channels(["delete", firstID], configuration: configuration)
            #expect(again.status != 0)
            #expect(again.standardError.contains("404 ChannelNotRegistered"))
        }
    }

    @Test("bad options and configurations are refused with what is wrong")
    func errors() async throws {
        try await withSimulator(channelLimit: 10) { configuration, directory, _ in
            let policy = try channels(["create", "--storage-policy", "forever"], configuration: configuration)
            #expect(policy.status != 0)
            #expect(policy.standardError.contains("--storage-policy"))
            let environment = try channels(["list", "--environment", "staging"], configuration: configuration)
            #expect(environment.status != 0)
            #expect(environment.standardError.contains("--environment"))

            let inProcess = directory.appendingPathComponent("in-process.yaml").path
            try Data("apns:\n  endpoint: simulator\n".utf8).write(to: URL(fileURLWithPath: inProcess))
            let simulator = try runProcess(["channels", "list", "--config", inProcess])
            #expect(simulator.status != 0)
            #expect(simulator.standardError.contains("apns.endpoint"))

            let wrongKey = directory.appendingPathComponent("wrong-key.yaml").path
            let text = try String(contentsOfFile: configuration, encoding: .utf8).replacingOccurrences(of: Self.keyID, with: "KEY9999999")
            try Data(text.utf8).write(to: URL(fileURLWithPath: wrongKey))
            let refused = try runProcess(["channels", "list", "--config", wrongKey])
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("InvalidProviderToken"))
        }
    }

    @Test("with several apps, --app chooses whose key and bundle; without it, or naming no app, the command says so")
    func severalApps() async throws {
        try await withSimulator(channelLimit: 10) { configuration, directory, port in
            let key = directory.appendingPathComponent("key.p8").path
            let certificate = directory.appendingPathComponent("sim.pem").path
            let twoApps = directory.appendingPathComponent("two-apps.yaml").path
            try Data("""
                apns:
                  endpoint: 127.0.0.1:\(port)
                  trust_roots: [\(certificate)]
                apps:
                  - {name: scores, bundle_id: \(Self.bundleID), team_id: \(Self.teamID), key_id: \(Self.keyID), key_path: \(key), environment: sandbox}
                  - {name: other, bundle_id: com.example.other, team_id: \(Self.teamID), key_id: \(Self.keyID), key_path: \(key)}
                """.utf8).write(to: URL(fileURLWithPath: twoApps))
            let created = try channels(["create", "--app", "scores"], configuration: twoApps)
            #expect(created.status == 0, "\(created.standardError)")
            let channelID = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try channels(["list", "--app", "scores"], configuration: twoApps).standardOutput.contains(channelID))
            let unnamed = try channels(["list"], configuration: twoApps)
            #expect(unnamed.status != 0)
            #expect(unnamed.standardError.contains("several apps (scores, other)"))
            let unknown = try channels(["list", "--app", "nope"], configuration: twoApps)
            #expect(unknown.status != 0)
            #expect(unknown.standardError.contains("\"nope\" is not an app"))
            // The simulator knows only the first app's bundle: the other app's request goes out with its own.
            let other = try channels(["list", "--app", "other"], configuration: twoApps)
            #expect(other.status != 0)
        }
    }
}
