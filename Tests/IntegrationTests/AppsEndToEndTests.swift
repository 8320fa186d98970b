import Foundation
import LiveDispatchCore
import Testing

/// Two apps in one deployment, as real processes: the embedded Kafka
/// cluster, a production and a sandbox APNs simulator (each accepting both
/// apps, each app with its own key) over TLS, and `livedispatch run`.
@Suite("Several apps end to end", .serialized)
struct AppsEndToEndTests {
    struct App {
        var name: String
        var bundleID: String
        var teamID: String
        var keyID: String
        var key: String
        var topic: String { bundleID + ".push-type.liveactivity" }
    }

    /// One simulator process accepting both apps, recording to its own file.
    struct Simulator {
        var process: BackgroundProcess
        var port: Int
        var certificate: String
        var record: URL
    }

    /// Both simulators serve one certificate: two self-signed ones of one
    /// subject name would confuse the client's lookup of the trusted issuer.
    static func startSimulator(_ name: String, apps: [App], in directory: URL) async throws -> Simulator {
        let certificate = directory.appendingPathComponent("simulators.pem").path
        let certificateKey = directory.appendingPathComponent("simulators-key.pem").path
        let served = FileManager.default.fileExists(atPath: certificate)
            ? ["--cert", certificate, "--cert-key", certificateKey] : ["--cert-out", certificate, "--cert-key-out", certificateKey]
        let record = directory.appendingPathComponent("\(name).jsonl")
        let first = apps[0]
        let others = apps.dropFirst().flatMap { ["--also-app", "\($0.teamID):\($0.keyID):\($0.bundleID):\($0.key)"] }
        let process = try BackgroundProcess([
            "simulate", "apns", "--port", "0", "--team-id", first.teamID, "--key-id", first.keyID, "--key", first.key,
            "--bundle-id", first.bundleID, "--record", record.path, "--threads", "1",
        ] + served + others)
        let listening = try await process.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("listening: ") }
        return Simulator(process: process, port: Int(listening.split(separator: ":").last ?? "") ?? 0, certificate: certificate, record: record)
    }

    @Test("each app's tokens reach their own environment's host with their own key and topic, on connections of their own, and nothing crosses")
    func twoApps() async throws {
        let stack = try await WorkerStack()
        var apps: [App] = []
        for (name, team, key) in [("scores", "TEAMSCORES", "KEYSCORES1"), ("courier", "TEAMCOURIE", "KEYCOURIE1")] {
            let path = stack.directory.appendingPathComponent("\(name).p8").path
            let generated = try runProcess(["simulate", "apns", "--generate-key", path])
            #expect(generated.status == 0)
            apps.append(App(name: name, bundleID: "com.example.\(name)", teamID: team, keyID: key, key: path))
        }
        let production = try await Self.startSimulator("production", apps: apps, in: stack.directory)
        let sandbox = try await Self.startSimulator("sandbox", apps: apps, in: stack.directory)
        let appsYAML = apps.map { app in
            """
              - name: \(app.name)
                bundle_id: \(app.bundleID)
                team_id: \(app.teamID)
                key_id: \(app.keyID)
                key_path: \(app.key)
                environment: \(app.name == "courier" ? "sandbox" : "production")
                endpoints:
                  production: 127.0.0.1:\(production.port)
                  sandbox: 127.0.0.1:\(sandbox.port)
            """
        }.joined(separator: "\n")
        let configuration = try writeWorkerConfiguration(
            in: stack.directory, bootstrap: stack.bootstrap, group: "e2e-apps", partitions: stack.partitions, createTopics: false,
            properties: ["log_level": "3"], sections: """
                apns:
                  endpoint: production
                  trust_roots: [\(production.certificate)]
                  connections: 1
                coalesce:
                  window: 50ms
                  max_delay: 200ms
                apps:
                \(appsYAML)
                """)
        let worker = try await stack.startWorker(configuration: configuration)

        // Tokens of each app in each environment; the courier's sandbox
        // token names no environment and takes its app's.
        let tokens: [(app: String, activity: String, environment: String?, token: String)] = [
            ("scores", "match-apps", "production", token(1, salt: 31)), ("scores", "match-apps", "sandbox", token(2, salt: 31)),
            ("courier", "order-apps", "production", token(3, salt: 31)), ("courier", "order-apps", nil, token(4, salt: 31)),
        ]
        for entry in tokens {
            let environment = entry.environment.map { #", "environment": "\#($0)""# } ?? ""
            try await stack.produce("livedispatch.tokens", key: entry.activity, #"{"activity_id": "\#(entry.activity)", "token": "\#(entry.token)", "app": "\#(entry.app)"\#(environment)}"#)
        }
        let stray = token(5, salt: 31)
        try await stack.produce("livedispatch.tokens", key: "order-apps", #"{"activity_id": "order-apps", "token": "\#(stray)"}"#)
        try await stack.produce("livedispatch.tokens", key: "order-apps", #"{"activity_id": "order-apps", "token": "\#(stray)", "app": "weather"}"#)
        _ = try await waitFor("the four tokens in token-store") {
            try await stack.read("livedispatch.token-store").count >= 4 ? true : nil
        }
        try await stack.produce("livedispatch.commands", key: "match-apps", #"{"activity_id": "match-apps", "content_state": {"teamOneScore": 1}, "app": "scores"}"#)
        try await stack.produce("livedispatch.commands", key: "order-apps", #"{"activity_id": "order-apps", "content_state": {"stop": 3}, "app": "courier"}"#)

        func byToken(_ simulator: Simulator) -> [String: [RecordedLine]] { Dictionary(grouping: recordedPushes(simulator.record), by: \.token) }
        _ = try await stack.waitWithDiagnostics("a push to each of the four tokens", workers: [worker]) {
            let received = byToken(production).merging(byToken(sandbox)) { $0 + $1 }
            return tokens.allSatisfy { received[$0.token]?.isEmpty == false } ? true : nil
        }

        for simulator in [production, sandbox] {
            let environment = simulator.record == production.record ? "production" : "sandbox"
            let pushes = recordedPushes(simulator.record)
            let expected = Set(tokens.filter { ($0.environment ?? "sandbox") == environment }.map { $0.token })
            #expect(Set(pushes.map(\.token)) == expected, "the \(environment) host got only its environment's tokens")
            var connections: [String: Set<String>] = [:]
            for push in pushes {
                let entry = try #require(tokens.first { $0.token == push.token })
                let app = try #require(apps.first { $0.name == entry.app })
                // The simulator accepted it: the JWT's kid and iss were this topic's app's.
                #expect(push.headers["apns-topic"] == app.topic, "\(entry.app) token on \(environment)")
                #expect(push.headers["apns-push-type"] == "liveactivity")
                connections[app.name, default: []].insert(push.value["connection"]?.description ?? "")
            }
            #expect(connections["scores"]?.isDisjoint(with: connections["courier"] ?? []) == true, "each bundle has its own connections")
        }
        #expect(recordedPushes(stack.recordFile).isEmpty, "the single-app simulator of the stack got nothing")

        let letters = try await stack.waitWithDiagnostics("the stray token's two dead letters", workers: [worker]) {
            let letters = try await stack.deadLetters().filter { $0.message.contains("field 'app'") }
            return letters.count >= 2 ? letters : nil
        }
        #expect(letters.contains { $0.message.contains("is required: this deployment sends for several apps (scores, courier)") })
        #expect(letters.contains { $0.message.contains(#""weather" is not an app of this deployment"#) })
        #expect(try await worker.stop() == 0)
        try await production.process.stop()
        try await sandbox.process.stop()
    }
}
