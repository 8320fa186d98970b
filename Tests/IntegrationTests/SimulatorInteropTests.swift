import APNsSimulator
import Crypto
import Foundation
import Testing

/// The APNs simulator driven by other HTTP/2 implementations: nghttp,
/// h2load and curl (all OpenSSL peers), over real TLS.
@Suite("APNs simulator against nghttp2 tools")
struct SimulatorInteropTests {
    static let token = String(repeating: "0a", count: 32)
    static let payload = #"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"home":1,"away":0}}}"#

    /// A running in-process simulator, its trust file and a key to sign tokens with.
    struct Running {
        var simulator: APNsSimulator
        var key: P256.Signing.PrivateKey
        var directory: URL
        var certificateFile: URL

        func headers(jwt: String? = nil, replacing overrides: [String: String?] = [:]) throws -> [(String, String)] {
            var headers: [(String, String?)] = [
                (":method", "POST"), ("authorization", "bearer \(try jwt ?? ProviderTokens.make(key: key))"),
                ("apns-push-type", "liveactivity"), ("apns-topic", "\(ProviderTokens.bundleID).push-type.liveactivity"),
                ("apns-priority", "10"), ("apns-expiration", "0"),
            ]
            for (name, value) in overrides {
                if let index = headers.firstIndex(where: { $0.0 == name }) { headers[index].1 = value } else { headers.append((name, value)) }
            }
            return headers.compactMap { name, value in value.map { (name, $0) } }
        }

        func send(
            path: String = "/3/device/\(SimulatorInteropTests.token)", replacing overrides: [String: String?] = [:],
            jwt: String? = nil, body: String? = SimulatorInteropTests.payload, multiply: Int = 1
        ) async throws -> NghttpExchange {
            try await nghttp(
                port: simulator.port, path: path, headers: try headers(jwt: jwt, replacing: overrides), body: body,
                certificateFile: certificateFile, directory: directory, multiply: multiply)
        }
    }

    func withSimulator(
        maxStreams: Int = 1000, initialMaxStreams: Int = 1, faults: SimulatorFaults = SimulatorFaults(), _ body: (Running) async throws -> Void
    ) async throws {
        let key = P256.Signing.PrivateKey()
        let simulator = try await APNsSimulator.start(
            configuration: .init(
                teamID: ProviderTokens.teamID, keyID: ProviderTokens.keyID, publicKey: key.publicKey,
                bundleID: ProviderTokens.bundleID, maxConcurrentStreams: maxStreams,
                initialMaxConcurrentStreams: initialMaxStreams, faults: faults, threads: 1))
        let directory = try TestPaths.temporaryDirectory("simulator")
        let certificateFile = directory.appendingPathComponent("cert.pem")
        do {
            try simulator.certificate.certificatePEM.write(to: certificateFile, atomically: true, encoding: .utf8)
            try await body(Running(simulator: simulator, key: key, directory: directory, certificateFile: certificateFile))
        } catch {
            try await simulator.stop()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        try await simulator.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    @Test("nghttp pushes over verified TLS: 200, apns-id echoed, recorded for the token, limit raised after it")
    func acceptedPush() async throws {
        try await withSimulator(maxStreams: 77) { running in
            let id = "5d1c3c4e-8a4b-4c1e-9a55-0123456789ab"
            let exchange = try await running.send(replacing: ["apns-id": id])
            #expect(exchange.certificateAccepted, "nghttp: \(exchange.errors)")
            #expect(exchange.statuses.values.sorted() == [200])
            let stream = try #require(exchange.statuses.keys.first)
            #expect(exchange.header("apns-id", stream: stream) == id)
            #expect(exchange.output.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1]"))
            #expect(exchange.output.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):77]"))

            let received = try #require(running.simulator.received(by: Self.token))
            #expect(received.count == 1)
            #expect(received.last.apnsID == id)
            #expect(received.last.headers["apns-topic"] == "\(ProviderTokens.bundleID).push-type.liveactivity")
            #expect(received.last.headers["authorization"] == nil)
            #expect(!received.last.headerFields.contains { $0.name == "authorization" })
            #expect(received.last.payloadJSON?["aps"]?["content-state"]?["home"]?.integerValue == 1)
            #expect(running.simulator.pushes(for: Self.token).map(\.apnsID) == [id])
            let connection = try #require(running.simulator.connections.first)
            #expect(connection.peakConcurrentStreams == 1)
            #expect(connection.announcedMaxConcurrentStreams == 77)
            #expect(connection.limitViolations == 0)
        }
    }

    @Test("refusals carry APNs statuses and reasons over the wire")
    func refusals() async throws {
        let gone: Int64 = 1_764_000_000_123
        try await withSimulator(faults: SimulatorFaults(unregisteredTokens: [String(repeating: "ee", count: 32): gone])) { running in
            let expired = try ProviderTokens.make(key: running.key, issuedAt: Int64(Date().timeIntervalSince1970) - 4000)
            let cases: [(NghttpExchange, Int, String)] = [
                (try await running.send(replacing: ["apns-topic": "com.example.sports"]), 400, "BadTopic"),
                (try await running.send(replacing: ["apns-topic": "com.other.push-type.liveactivity"]), 400, "DeviceTokenNotForTopic"),
                (try await running.send(replacing: ["apns-priority": "3"]), 400, "BadPriority"),
                (try await running.send(jwt: expired), 403, "ExpiredProviderToken"),
                (try await running.send(replacing: ["authorization": nil]), 403, "MissingProviderToken"),
                (try await running.send(path: "/3/other"), 404, "BadPath"),
                (try await running.send(replacing: [":method": "PUT"]), 405, "MethodNotAllowed"),
                (try await running.send(body: #"{"aps":{"event":"update","timestamp":1,"pad":""# + String(repeating: "x", count: 4100) + #""}}"#), 413, "PayloadTooLarge"),
                (try await running.send(body: nil), 400, "PayloadEmpty"),
                (try await running.send(path: "/3/device/" + String(repeating: "ee", count: 32)), 410, "Unregistered"),
            ]
            for (exchange, status, reason) in cases {
                #expect(exchange.statuses.values.sorted() == [status], "\(reason): \(exchange.output.suffix(400))")
                #expect(exchange.output.contains(#""reason":"\#(reason)""#), "\(reason)")
            }
            #expect(cases.last?.0.output.contains(#""timestamp":\#(gone)"#) == true)
            #expect(running.simulator.acceptedCount == 0)
        }
    }

    func runH2load(_ running: Running, requests: Int, clients: Int, streams: Int) async throws -> String {
        let body = running.directory.appendingPathComponent("payload.json")
        try Self.payload.write(to: body, atomically: true, encoding: .utf8)
        var arguments = ["-n", String(requests), "-c", String(clients), "-m", String(streams), "-d", body.path]
        for (name, value) in try running.headers() { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("https://127.0.0.1:\(running.simulator.port)/3/device/\(Self.token)")
        return try await runTool("/usr/bin/h2load", arguments).standardOutput
    }

    /// The `requests:` line of h2load: (succeeded, errored).
    func h2loadCounts(_ output: String) -> (succeeded: Int, errored: Int)? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("requests:") }) else { return nil }
        let words = line.split(separator: " ")
        func number(before label: String) -> Int? {
            guard let index = words.firstIndex(where: { $0.hasPrefix(label) }), index > 0 else { return nil }
            return Int(words[index - 1])
        }
        guard let succeeded = number(before: "succeeded"), let errored = number(before: "errored") else { return nil }
        return (succeeded, errored)
    }

    @Test("h2load completes requests; concurrency stays within the announced limit")
    func h2load() async throws {
        try await withSimulator(maxStreams: 20, initialMaxStreams: 20) { running in
            let output = try await runH2load(running, requests: 600, clients: 2, streams: 20)
            #expect(output.contains("600 succeeded"), "\(output)")
            #expect(running.simulator.acceptedCount == 600)
            #expect(running.simulator.received(by: Self.token)?.count == 600)
            let connections = running.simulator.connections
            #expect(connections.count == 2)
            #expect(connections.allSatisfy { $0.peakConcurrentStreams <= 20 && $0.limitViolations == 0 }, "\(connections)")
        }
    }

    @Test("with one stream until the first push, h2load loses only streams opened before the limit rose")
    func h2loadWithInitialLimit() async throws {
        try await withSimulator(maxStreams: 50) { running in
            let output = try await runH2load(running, requests: 300, clients: 1, streams: 10)
            let counts = try #require(h2loadCounts(output), "\(output)")
            #expect(counts.succeeded + counts.errored == 300)
            #expect(counts.errored < 10)
            #expect(running.simulator.acceptedCount == counts.succeeded)
            #expect(running.simulator.connections.first?.announcedMaxConcurrentStreams == 50)
        }
    }

    @Test("GOAWAY after N streams names the last processed stream")
    func goAway() async throws {
        try await withSimulator(faults: SimulatorFaults(goAwayAfterStreams: 1)) { running in
            let exchange = try await running.send()
            #expect(exchange.statuses.values.sorted() == [200])
            let stream = try #require(exchange.statuses.keys.first)
            #expect(exchange.output.contains("recv GOAWAY frame"))
            #expect(exchange.output.contains("last_stream_id=\(stream)"))
        }
    }

    @Test("REFUSED_STREAM and dropped connections reach the client")
    func refusedAndReset() async throws {
        try await withSimulator(faults: SimulatorFaults(refuseStreamEvery: 1)) { running in
            let exchange = try await running.send()
            #expect(exchange.output.contains("REFUSED_STREAM"))
            #expect(exchange.statuses.isEmpty)
            try running.simulator.setFaults(SimulatorFaults(resetConnectionAfterRequests: 1))
            let reset = try await running.send()
            #expect(reset.statuses.isEmpty)
            #expect(running.simulator.acceptedCount == 0)
            try running.simulator.setFaults(SimulatorFaults(errorSchedule: [503]))
            let unavailable = try await running.send()
            #expect(unavailable.statuses.values.sorted() == [503])
            #expect(unavailable.output.contains(#""reason":"ServiceUnavailable""#))
        }
    }

    @Test("the CLI: key generation, listening line, certificate file trusted by curl, JSONL record, clean stop")
    func commandLine() async throws {
        let directory = try TestPaths.temporaryDirectory("simulate-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("key.p8")
        let generated = try runProcess(["simulate", "apns", "--generate-key", keyFile.path])
        #expect(generated.status == 0, "\(generated.standardError)")
        _ = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOf: keyFile, encoding: .utf8))
        let certificateFile = directory.appendingPathComponent("cert.pem")
        let recordFile = directory.appendingPathComponent("pushes.jsonl")
        let process = try BackgroundProcess([
            "simulate", "apns", "--port", "0", "--team-id", ProviderTokens.teamID, "--key-id", ProviderTokens.keyID,
            "--key", keyFile.path, "--bundle-id", ProviderTokens.bundleID, "--max-streams", "500",
            "--cert-out", certificateFile.path, "--record", recordFile.path, "--threads", "1",
        ])
        let line = try await process.waitForLine { $0.hasPrefix("listening: ") }
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0) })

        let verify = try await runTool("/usr/bin/openssl", ["verify", "-CAfile", certificateFile.path, certificateFile.path])
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")

        let printed = try runProcess([
            "simulate", "apns", "--print-token", "--team-id", ProviderTokens.teamID, "--key-id", ProviderTokens.keyID,
            "--key", keyFile.path,
        ])
        #expect(printed.status == 0, "\(printed.standardError)")
        let jwt = printed.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(jwt.split(separator: ".").count == 3)
        let curl = try await runTool("/usr/bin/curl", [
            "--silent", "--show-error", "--http2", "--cacert", certificateFile.path, "-o", "/dev/null",
            "-w", "%{http_code} %{http_version}", "-X", "POST",
            "-H", "authorization: bearer \(jwt)", "-H", "apns-push-type: liveactivity",
            "-H", "apns-topic: \(ProviderTokens.bundleID).push-type.liveactivity", "-H", "apns-priority: 5",
            "--data-binary", Self.payload, "https://127.0.0.1:\(port)/3/device/\(Self.token)",
        ])
        #expect(curl.status == 0, "curl: \(curl.standardError)")
        #expect(curl.standardOutput == "200 2", "curl: \(curl.standardOutput) \(curl.standardError)")

        let recorded = try await waitFor("a recorded push", timeout: .seconds(30)) { () -> String? in
            let text = (try? String(contentsOf: recordFile, encoding: .utf8)) ?? ""
            return text.hasSuffix("\n") ? text : nil
        }
        #expect(recorded.split(separator: "\n").count == 1)
        #expect(recorded.contains(#""token":"\#(Self.token)""#))
        #expect(recorded.contains(#""apns-priority":"5""#))
        #expect(!recorded.contains(jwt))
        #expect(try await process.stop() == 0)
    }

    @Test("the CLI's fault flags: an error schedule and unregistered tokens")
    func commandLineFaults() async throws {
        let directory = try TestPaths.temporaryDirectory("simulate-faults")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("key.p8")
        #expect(try runProcess(["simulate", "apns", "--generate-key", keyFile.path]).status == 0)
        let certificateFile = directory.appendingPathComponent("cert.pem")
        let gone = String(repeating: "ef", count: 32)
        let process = try BackgroundProcess([
            "simulate", "apns", "--team-id", ProviderTokens.teamID, "--key-id", ProviderTokens.keyID,
            "--key", keyFile.path, "--bundle-id", ProviderTokens.bundleID, "--cert-out", certificateFile.path,
            "--error-schedule", "429,200", "--unregistered", gone.uppercased(), "--latency-ms", "5", "--threads", "1",
        ])
        let line = try await process.waitForLine { $0.hasPrefix("listening: ") }
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0) })
        let jwt = try runProcess([
            "simulate", "apns", "--print-token", "--team-id", ProviderTokens.teamID, "--key-id", ProviderTokens.keyID,
            "--key", keyFile.path,
        ]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)

        func post(_ token: String) async throws -> String {
            try await runTool("/usr/bin/curl", [
                "--silent", "--show-error", "--http2", "--cacert", certificateFile.path,
                "-w", " %{http_code}", "-X", "POST", "-H", "authorization: bearer \(jwt)",
                "-H", "apns-push-type: liveactivity", "-H", "apns-topic: \(ProviderTokens.bundleID).push-type.liveactivity",
                "--data-binary", Self.payload, "https://127.0.0.1:\(port)/3/device/\(token)",
            ]).standardOutput
        }
        // curl opens a connection per call: each is the first push of its connection.
        #expect(try await post(Self.token) == #"{"reason":"TooManyRequests"} 429"#)
        #expect(try await post(Self.token) == " 200")
        let unregistered = try await post(gone)
        #expect(unregistered.hasPrefix(#"{"reason":"Unregistered","timestamp":"#))
        #expect(unregistered.hasSuffix(" 410"))
        #expect(try await process.stop(signal: SIGINT) == 0)
    }

    @Test("the CLI refuses inconsistent options with a message")
    func commandLineValidation() throws {
        let missing = try runProcess(["simulate", "apns", "--team-id", "T", "--key-id", "K", "--bundle-id", "b"])
        #expect(missing.status != 0)
        #expect(missing.standardError.contains("--key"))
        let unreadable = try runProcess([
            "simulate", "apns", "--print-token", "--team-id", "T", "--key-id", "K", "--key", "/nonexistent.p8",
        ])
        #expect(unreadable.status != 0)
        #expect(unreadable.standardError.contains("/nonexistent.p8"))
    }
}
