import APNs
import ArgumentParser
import Crypto
import Foundation
import LiveDispatchCore
import Logging
import NIOSSL
import Synchronization

/// `livedispatch-bench`: load generators that print throughput and latency.
/// Those that need a worker, a cluster or a simulator run the `livedispatch`
/// built beside this executable as child processes.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedispatch-bench",
        abstract: "Measure LiveDispatch components.",
        subcommands: [
            BenchAPNsCommand.self, BenchWorkerCommand.self, BenchDispatchCommand.self, BenchFanOutCommand.self, BenchFaultsCommand.self,
            BenchScaleCommand.self, BenchSoakCommand.self, BenchHTTPAttackCommand.self, BenchRulesDiffCommand.self, BenchKafkaConsumeCommand.self, BenchIdleCommand.self,
            BenchJSONCommand.self,
        ]
    )
}

/// `livedispatch-bench apns`: sends N pushes over C connections with the APNs
/// client and prints `pushes/s` and latency percentiles; beside h2load or
/// AsyncHTTPClient sending the same requests, the ratios too.
struct BenchAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "Send pushes to an APNs endpoint (the simulator, nghttpd) and print the rate and latency."
    )

    @Option(help: "The server, https://HOST:PORT.") var endpoint: String
    @Option(help: "HTTP/2 connections.") var connections = 1
    @Option(help: "Pushes to send.") var requests = 100_000
    @Option(help: "Device token (hex) every push goes to.") var token: String
    @Option(help: "Pushes in flight at once (default: 200 per connection).") var concurrency: Int?
    @Option(name: .customLong("trust-roots"), help: "PEM file of certificates to trust (a self-signed server).")
    var trustRoots: String?
    @Flag(help: "Do not verify the server certificate (local servers only).") var insecure = false
    @Option(name: .customLong("server-name"), help: "Name to verify in the certificate (default: the host).")
    var serverName: String?
    @Option(help: "The .p8 (PKCS#8 PEM) signing key; a fresh key when omitted.") var key: String?
    @Option(name: .customLong("key-id"), help: "Key id (kid).") var keyID = "KEY1234567"
    @Option(name: .customLong("team-id"), help: "Team id (iss).") var teamID = "TEAM123456"
    @Option(name: .customLong("bundle-id"), help: "The app's bundle id.") var bundleID = "com.example.app"
    @Option(name: .customLong("payload-bytes"), help: "Approximate payload size in bytes.") var payloadBytes = 256
    @Option(help: "Per-request deadline in seconds.") var timeout = 30.0
    @Option(help: "Pushes per send call (a fan-out); latency is then per batch.") var batch = 1
    @Option(help: "Rounds of --requests pushes (with --compare-h2load, each followed by h2load's).") var rounds = 1
    @Flag(
        name: .customLong("compare-h2load"),
        help: """
            After each round, send the same number of requests with h2load over the same number of connections: once with \
            the headers the client sends (provider token, priority, expiration, apns-id, content type) and the same payload, \
            once with only the path, topic and push type; print the client's rate over each.
            """)
    var compareH2load = false
    @Flag(
        name: .customLong("compare-async-http-client"),
        help: """
            After each round, send the same number of pushes with AsyncHTTPClient over the same number of HTTP/2 \
            connections (one HTTPClient each), from as many senders, with the same headers and payload; print the \
            client's rate over AsyncHTTPClient's.
            """)
    var compareAsyncHTTPClient = false
    @Option(name: .customLong("h2load-path"), help: "The h2load to run.") var h2loadPath = "/usr/bin/h2load"
    @Option(name: .customLong("h2load-streams"), help: "h2load's streams per connection (-m).") var h2loadStreams = 100

    func validate() throws {
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1") }
        guard requests >= 1 else { throw ValidationError("--requests must be at least 1") }
        guard trustRoots == nil || !insecure else { throw ValidationError("give --trust-roots or --insecure, not both") }
        if let concurrency, concurrency < 1 { throw ValidationError("--concurrency must be at least 1") }
        guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        guard h2loadStreams >= 1 else { throw ValidationError("--h2load-streams must be at least 1") }
        if compareAsyncHTTPClient, batch != 1 { throw ValidationError("--compare-async-http-client sends one push per request: leave --batch at 1") }
        if compareH2load, !FileManager.default.isExecutableFile(atPath: h2loadPath) {
            throw ValidationError("--compare-h2load: \(h2loadPath) is not an executable (install nghttp2-client or give --h2load-path)")
        }
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench")
        logger.logLevel = .warning
        let deviceToken: DeviceToken
        do { deviceToken = try DeviceToken(hex: token) } catch { throw ValidationError("--token: \(error)") }
        var endpoint = try APNsClientConfiguration.Endpoint(url: self.endpoint)
        if let serverName { endpoint.serverName = serverName }
        var roots: [NIOSSLCertificate] = []
        if let trustRoots { roots = try NIOSSLCertificate.fromPEMFile(trustRoots) }
        let signingKey: APNsSigningKey
        if let key {
            let pem = try String(contentsOfFile: key, encoding: .utf8)
            signingKey = try APNsSigningKey(pemRepresentation: pem, keyID: keyID, teamID: teamID)
        } else {
            signingKey = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: keyID, teamID: teamID)
        }
        let batch = self.batch
        let inFlight = concurrency ?? max(1, 200 * connections / batch)
        let configuration = APNsClientConfiguration(
            endpoint: endpoint, connections: connections, maxQueued: max(inFlight * batch, 1), requestTimeout: timeout,
            additionalTrustRoots: roots, disablesCertificateVerification: insecure)
        let pool = try APNsConnectionPool(configuration: configuration, signingKey: signingKey, logger: logger)
        let payload = Self.payload(bytes: payloadBytes)
        let bundleID = self.bundleID

        // Warm up: one push per connection opens and authenticates them.
        for _ in 0..<connections {
            let outcome = await pool.send(Self.request(deviceToken, bundleID: bundleID, payload: payload))
            guard case .delivered = outcome else {
                await pool.shutdown()
                throw BenchError(description: "the warm-up push failed: \(outcome)")
            }
        }

        var comparison: H2loadComparison?
        if compareH2load {
            comparison = try H2loadComparison(
                executable: h2loadPath, endpoint: endpoint, token: token, bundleID: bundleID, payload: payload,
                authorization: "bearer " + signingKey.providerToken(issuedAt: UnixTime(seconds: Date().timeIntervalSince1970)),
                connections: connections, requests: requests, streams: h2loadStreams)
        }
        defer { comparison?.removeFiles() }
        var library: AsyncHTTPClientComparison?
        if compareAsyncHTTPClient {
            let compared = AsyncHTTPClientComparison(
                endpoint: endpoint, connections: connections, trustRoots: roots, insecure: insecure, token: deviceToken, bundleID: bundleID,
                payload: payload, authorization: try "bearer " + signingKey.providerToken(issuedAt: UnixTime(seconds: Date().timeIntervalSince1970)),
                timeout: timeout)
            library = compared
            do {
                try await compared.warmUp()
            } catch {
                await compared.shutdown()
                await pool.shutdown()
                throw error
            }
        }

        var rounds: [(client: Measurement, sameHeaders: Double?, minimalHeaders: Double?, library: Measurement?)] = []
        for round in 1...self.rounds {
            let client = await Self.measure(pool: pool, requests: requests, senders: inFlight, batch: batch) {
                Self.request(deviceToken, bundleID: bundleID, payload: payload)
            }
            var line = "round \(round): " + String(format: "client %.0f pushes/s", client.rate)
            var sameHeaders: Double?, minimalHeaders: Double?
            if let comparison {
                do {
                    sameHeaders = try comparison.run(headers: .same)
                    minimalHeaders = try comparison.run(headers: .minimal)
                } catch {
                    await pool.shutdown()
                    throw error
                }
                line += String(
                    format: ", h2load (same headers) %.0f requests/s, h2load (minimal headers) %.0f requests/s", sameHeaders ?? 0, minimalHeaders ?? 0)
            }
            var libraryRound: Measurement?
            if let library {
                let measured = await library.measure(requests: requests, senders: inFlight)
                libraryRound = measured
                line += String(format: ", AsyncHTTPClient %.0f pushes/s", measured.rate)
            }
            if self.rounds > 1 || comparison != nil || library != nil { print(line) }
            rounds.append((client, sameHeaders, minimalHeaders, libraryRound))
        }
        await library?.shutdown()
        await pool.shutdown()

        let sorted = rounds.flatMap(\.client.latencies).sorted()
        func percentile(_ fraction: Double, of sorted: [Int64]) -> String {
            guard !sorted.isEmpty else { return "n/a" }
            let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
            return String(format: "%.3f ms", Double(sorted[max(0, index)]) / 1e6)
        }
        let outcomes = rounds.map(\.client.outcomes).reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) }
        let clientSeconds = rounds.map(\.client.seconds).reduce(0, +)
        print(
            "endpoint: \(endpoint) connections: \(connections) senders: \(inFlight) batch: \(batch) payload: \(payload.count) bytes")
        print("outcomes: " + outcomes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        print(String(format: "pushes/s: %.0f", Double(requests * rounds.count) / clientSeconds))
        print("latency\(batch > 1 ? " (per batch)" : "") p50: \(percentile(0.50, of: sorted)) p99: \(percentile(0.99, of: sorted)) p999: \(percentile(0.999, of: sorted))")
        if comparison != nil {
            // Each ratio compares the same number of requests, round by round,
            // so it is total time against total time.
            for (label, rates) in [("same headers", rounds.compactMap(\.sameHeaders)), ("minimal headers", rounds.compactMap(\.minimalHeaders))] {
                let h2loadSeconds = rates.map { Double(requests) / $0 }.reduce(0, +)
                let each = zip(rounds, rates).map { String(format: "%.2f", $1 == 0 ? 0 : $0.client.rate / $1) }
                print(String(format: "client / h2load (%@): %.2f", label, h2loadSeconds / clientSeconds) + " (rounds: \(each.joined(separator: " ")))")
            }
        }
        if library != nil {
            let measured = rounds.compactMap(\.library)
            let libraryOutcomes = measured.map(\.outcomes).reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) }
            let librarySeconds = measured.map(\.seconds).reduce(0, +)
            let librarySorted = measured.flatMap(\.latencies).sorted()
            print("AsyncHTTPClient outcomes: " + libraryOutcomes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
            print(String(format: "AsyncHTTPClient pushes/s: %.0f", Double(requests * measured.count) / max(librarySeconds, 1e-9)))
            print("AsyncHTTPClient latency p50: \(percentile(0.50, of: librarySorted)) p99: \(percentile(0.99, of: librarySorted)) p999: \(percentile(0.999, of: librarySorted))")
            // The same number of pushes each round: total time against total time.
            let each = rounds.compactMap { round in round.library.map { String(format: "%.2f", $0.rate == 0 ? 0 : round.client.rate / $0.rate) } }
            print(String(format: "client / AsyncHTTPClient: %.2f", librarySeconds / max(clientSeconds, 1e-9)) + " (rounds: \(each.joined(separator: " ")))")
            print("load average: \(LoadAverage.current())")
        }
    }

    /// One round of the client: `requests` pushes from `senders` tasks, `batch` per send.
    struct Measurement {
        var seconds: Double
        var latencies: [Int64]
        var outcomes: [String: Int]
        var rate: Double { seconds > 0 ? Double(outcomes.values.reduce(0, +)) / seconds : 0 }
    }

    static func measure(
        pool: APNsConnectionPool, requests total: Int, senders: Int, batch: Int, request: @escaping @Sendable () -> APNsRequest
    ) async -> Measurement {
        let next = Ticket(limit: total)
        let started = ContinuousClock.now
        let results = await withTaskGroup(of: ([Int64], [String: Int]).self) { group in
            for _ in 0..<senders {
                group.addTask {
                    var latencies: [Int64] = []
                    var outcomes: [String: Int] = [:]
                    // Counted apart: a label's hashing per push would be the harness's cost, not the client's.
                    var delivered = 0
                    while true {
                        let count = next.take(upTo: batch)
                        guard count > 0 else { break }
                        func tally(_ outcome: APNsOutcome) {
                            if case .delivered = outcome { delivered += 1 } else { outcomes[outcome.label, default: 0] += 1 }
                        }
                        let begin: ContinuousClock.Instant
                        if count == 1 {
                            let request = request()
                            begin = .now
                            tally(await pool.send(request))
                        } else {
                            let requests = (0..<count).map { _ in request() }
                            begin = .now
                            for outcome in await pool.send(requests) { tally(outcome) }
                        }
                        let elapsed = ContinuousClock.now - begin
                        latencies.append(elapsed.nanoseconds)
                    }
                    if delivered > 0 { outcomes["delivered", default: 0] += delivered }
                    return (latencies, outcomes)
                }
            }
            return await BenchAPNsCommand.gather(&group, expecting: total)
        }
        let elapsed = ContinuousClock.now - started
        return Measurement(
            seconds: elapsed.seconds,
            latencies: results.0, outcomes: results.1)
    }

    /// A Live Activity update of about `bytes` bytes.
    static func payload(bytes: Int) -> [UInt8] {
        let head = #"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"note":""#
        let tail = #""}}}"#
        let filler = String(repeating: "x", count: max(0, bytes - head.utf8.count - tail.utf8.count))
        return Array((head + filler + tail).utf8)
    }

    static func request(_ token: DeviceToken, bundleID: String, payload: [UInt8]) -> APNsRequest {
        APNsRequest(
            destination: .device(token), bundleID: bundleID, priority: .immediate, expiration: nil,
            apnsID: apnsIDs.next(), payload: payload)
    }

    /// The same ids as the worker's sends: unique, without a system call each.
    static let apnsIDs = APNsIDSequence()
}

/// Hands out at most `limit` tickets to the sending tasks.
final class Ticket: Sendable {
    private let taken = Atomic(0)
    private let limit: Int
    init(limit: Int) { self.limit = limit }

    /// Up to `count` tickets; 0 when none are left.
    func take(upTo count: Int) -> Int {
        let before = taken.wrappingAdd(count, ordering: .relaxed).oldValue
        return max(0, min(count, limit - before))
    }
}

/// A benchmark that could not run, with what happened.
struct BenchError: Error, CustomStringConvertible {
    var description: String
}

extension BenchAPNsCommand {
    /// Every sender task's latencies and outcome counts, together.
    static func gather(_ group: inout TaskGroup<([Int64], [String: Int])>, expecting total: Int) async -> ([Int64], [String: Int]) {
        var latencies: [Int64] = []
        latencies.reserveCapacity(total)
        var outcomes: [String: Int] = [:]
        for await (part, counts) in group {
            latencies.append(contentsOf: part)
            outcomes.merge(counts, uniquingKeysWith: +)
        }
        return (latencies, outcomes)
    }
}
