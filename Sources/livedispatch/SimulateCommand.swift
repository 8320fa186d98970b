import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import Synchronization

/// `livedispatch simulate …`: stand-ins for the services LiveDispatch talks to.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a stand-in for a service LiveDispatch talks to.",
        subcommands: [SimulateAPNsCommand.self]
    )
}

/// `livedispatch simulate apns`: an APNs imitation over HTTP/2 and TLS.
struct SimulateAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "Serve an APNs imitation over HTTP/2 + TLS on loopback.",
        discussion: """
            Serves pushes to devices (/3/device), broadcast sends (/4/broadcasts/apps) and broadcast channel \
            management (/1/apps/BUNDLE/channels, /all-channels) on the one port. Prints `listening: HOST:PORT` once ready and runs until SIGTERM or SIGINT. \
            Logs go to standard error. With --generate-key FILE it only writes a fresh .p8 key and exits.
            """
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one.") var port = 0
    @Option(name: .customLong("team-id"), help: "Team id expected in the provider token's iss.") var teamID: String?
    @Option(name: .customLong("key-id"), help: "Key id expected in the provider token's kid.") var keyID: String?
    @Option(help: "The team's .p8 private key (PEM); its public half verifies tokens.") var key: String?
    @Option(name: .customLong("public-key"), help: "The public key (PEM) that verifies provider tokens.")
    var publicKey: String?
    @Option(name: .customLong("bundle-id"), help: "The app's bundle id.") var bundleID: String?
    @Option(
        name: .customLong("also-app"),
        help: "Another app accepted, as TEAM_ID:KEY_ID:BUNDLE_ID:KEY_FILE (.p8 or public key PEM); repeatable.")
    var otherApps: [String] = []
    @Option(name: .customLong("max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS after the first good push.")
    var maxStreams = 1000
    @Option(
        name: .customLong("initial-max-streams"),
        help: "SETTINGS_MAX_CONCURRENT_STREAMS before the first good push (APNs: 1; raise it for h2load).")
    var initialMaxStreams = 1
    @Option(help: "TLS certificate (PEM) to serve instead of a generated one; needs --cert-key.") var cert: String?
    @Option(name: .customLong("cert-key"), help: "Private key (PEM) of --cert.") var certKey: String?
    @Option(name: .customLong("cert-out"), help: "Write the served certificate (PEM) here, for clients to trust.")
    var certOut: String?
    @Option(name: .customLong("cert-key-out"), help: "Write the served certificate's private key (PEM) here.")
    var certKeyOut: String?
    @Option(help: "Append one JSON line per accepted push to this file.") var record: String?
    @Option(name: .customLong("generate-key"), help: "Write a fresh .p8 (PKCS#8 PEM) P-256 key to FILE and exit.")
    var generateKey: String?
    @Flag(
        name: .customLong("print-token"),
        help: "Print a provider token (JWT) signed with --key for --team-id and --key-id, and exit.")
    var printToken = false
    @Option(help: "Event loop threads (default: one per core).") var threads: Int?
    @Option(help: "Accepted pushes kept in memory, newest first (per-token counts are always kept).")
    var history = 10_000

    @Option(name: .customLong("error-rate"), help: "Share (0...1) of good pushes answered with an error status.")
    var errorRate: Double = 0
    @Option(name: .customLong("error-statuses"), help: "Statuses for --error-rate, comma-separated (429,500,503).")
    var errorStatuses = "429,500,503"
    @Option(
        help: "Seed for --error-rate: the Nth request over the server draws the seed's Nth number, so a run fails the same requests of an arrival order.")
    var seed: UInt64?
    @Option(
        name: .customLong("error-schedule"),
        help: "A cycle of statuses for good pushes in arrival order, e.g. 503,200,200 (200 passes).")
    var errorSchedule: String?
    @Option(name: .customLong("goaway-after"), help: "Per connection: send GOAWAY after this many streams.")
    var goAwayAfter: Int?
    @Option(name: .customLong("refuse-every"), help: "Reset every Nth request REFUSED_STREAM.") var refuseEvery: Int?
    @Option(name: .customLong("reset-after"), help: "Per connection: close TCP after this many requests.")
    var resetAfter: Int?
    @Option(name: .customLong("latency-ms"), help: "Delay added before every response, in milliseconds.")
    var latencyMilliseconds: Int64 = 0
    @Option(name: .customLong("unregistered"), help: "A device token (hex) answered 410 Unregistered; repeatable.")
    var unregistered: [String] = []
    @Flag(
        name: .customLong("drop-to-one-after-rejection"),
        help: "After a push answered other than 200, allow one stream and reset the others REFUSED_STREAM.")
    var dropToOneAfterRejection = false
    @Option(name: .customLong("retry-after"), help: "Seconds sent as retry-after with injected 429 and 503 answers.")
    var retryAfter: Int?
    @Option(
        name: .customLong("channel-limit"),
        help: "Broadcast channels the app may keep at once (APNs: 10,000 per app and environment).")
    var channelLimit = 10_000

    func run() async throws {
        if let generateKey {
            let pem = P256.Signing.PrivateKey().pemRepresentation
            guard FileManager.default.createFile(
                atPath: generateKey, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600])
            else { throw ValidationError("cannot write \(generateKey); check the directory exists and is writable") }
            return
        }
        if printToken {
            guard let teamID, let keyID, let key else {
                throw ValidationError("--print-token needs --team-id, --key-id and --key")
            }
            let privateKey: P256.Signing.PrivateKey
            do {
                privateKey = try P256.Signing.PrivateKey(pemRepresentation: readText(key))
            } catch {
                throw ValidationError("\(key) is not a P-256 .p8 private key in PEM: \(error)")
            }
            let token = try ProviderTokenSigner.token(
                key: privateKey, keyID: keyID, teamID: teamID, issuedAt: Int64(Date().timeIntervalSince1970))
            FileHandle.standardOutput.write(Data((token + "\n").utf8))
            return
        }
        guard let teamID, let keyID, let bundleID else {
            throw ValidationError("--team-id, --key-id and --bundle-id are required")
        }
        let verificationKey = try loadVerificationKey()
        var certificate: SimulatorCertificate?
        switch (cert, certKey) {
        case (let cert?, let certKey?):
            certificate = SimulatorCertificate(certificatePEM: try readText(cert), privateKeyPEM: try readText(certKey))
        case (nil, nil):
            certificate = nil
        default:
            throw ValidationError("--cert and --cert-key go together")
        }
        let faults = try makeFaults()
        guard channelLimit >= 0 else { throw ValidationError("--channel-limit: expected 0 or more, got \(channelLimit)") }
        let logger = Logger(label: "livedispatch.simulator") { StreamLogHandler.standardError(label: $0) }
        var configuration = APNsSimulator.Configuration(
            host: host, port: port, teamID: teamID, keyID: keyID, publicKey: verificationKey, bundleID: bundleID,
            maxConcurrentStreams: maxStreams, initialMaxConcurrentStreams: initialMaxStreams,
            certificate: certificate, faults: faults, recordFile: record, historyLimit: history,
            threads: threads ?? ProcessInfo.processInfo.activeProcessorCount, channelLimit: channelLimit)
        configuration.otherApps = try otherApps.map(parseApp)
        let simulator = try await APNsSimulator.start(configuration: configuration, logger: logger)
        if let certOut { try writeText(simulator.certificate.certificatePEM, to: certOut) }
        if let certKeyOut { try writeText(simulator.certificate.privateKeyPEM, to: certKeyOut, private: true) }
        FileHandle.standardOutput.write(Data("listening: \(simulator.host):\(simulator.port)\n".utf8))
        let signal = await waitForTerminationSignal()
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
    }

    /// `TEAM_ID:KEY_ID:BUNDLE_ID:KEY_FILE` of `--also-app`.
    private func parseApp(_ text: String) throws -> APNsSimulator.Configuration.App {
        let parts = text.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, !parts.contains(where: \.isEmpty) else {
            throw ValidationError("--also-app \(text.debugDescription): expected TEAM_ID:KEY_ID:BUNDLE_ID:KEY_FILE")
        }
        let pem = try readText(parts[3])
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            return .init(teamID: parts[0], keyID: parts[1], publicKey: key.publicKey, bundleID: parts[2])
        }
        guard let key = try? P256.Signing.PublicKey(pemRepresentation: pem) else {
            throw ValidationError("--also-app: \(parts[3]) is neither a P-256 .p8 private key nor a P-256 public key in PEM")
        }
        return .init(teamID: parts[0], keyID: parts[1], publicKey: key, bundleID: parts[2])
    }

    private func loadVerificationKey() throws -> P256.Signing.PublicKey {
        switch (key, publicKey) {
        case (let key?, nil):
            do {
                return try P256.Signing.PrivateKey(pemRepresentation: readText(key)).publicKey
            } catch {
                throw ValidationError("\(key) is not a P-256 .p8 private key in PEM: \(error)")
            }
        case (nil, let publicKey?):
            do {
                return try P256.Signing.PublicKey(pemRepresentation: readText(publicKey))
            } catch {
                throw ValidationError("\(publicKey) is not a P-256 public key in PEM: \(error)")
            }
        case (nil, nil), (.some, .some):
            throw ValidationError("give exactly one of --key FILE.p8 or --public-key FILE.pem")
        }
    }

    private func makeFaults() throws -> SimulatorFaults {
        func statuses(_ text: String, option: String) throws -> [Int] {
            try text.split(separator: ",").map { part in
                guard let status = Int(part.trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError("\(option): \(part) is not a status")
                }
                return status
            }
        }
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000)
        var unregisteredTokens: [String: Int64] = [:]
        for token in unregistered { unregisteredTokens[token.lowercased()] = timestamp }
        let faults = SimulatorFaults(
            errorRate: errorRate, errorStatuses: try statuses(errorStatuses, option: "--error-statuses"), seed: seed,
            errorSchedule: try errorSchedule.map { try statuses($0, option: "--error-schedule") } ?? [],
            goAwayAfterStreams: goAwayAfter, refuseStreamEvery: refuseEvery, resetConnectionAfterRequests: resetAfter,
            latencyMilliseconds: latencyMilliseconds, unregisteredTokens: unregisteredTokens,
            dropToOneStreamAfterRejection: dropToOneAfterRejection, retryAfterSeconds: retryAfter)
        do {
            try faults.validate()
        } catch {
            throw ValidationError(error.message)
        }
        return faults
    }

    private func readText(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read \(path)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    private func writeText(_ text: String, to path: String, private isPrivate: Bool = false) throws {
        let attributes: [FileAttributeKey: Any]? = isPrivate ? [.posixPermissions: 0o600] : nil
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: attributes) else {
            throw ValidationError("cannot write \(path); check the directory exists and is writable")
        }
    }
}

/// Waits for SIGTERM or SIGINT and returns which one came.
func waitForTerminationSignal() async -> Int32 {
    let queue = DispatchQueue(label: "livedispatch.signals")
    let once = SignalOnce()
    var sources: [any DispatchSourceSignal] = []
    for number in [SIGTERM, SIGINT] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
        source.setEventHandler { once.deliver(number) }
        source.resume()
        sources.append(source)
    }
    let received = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
        once.wait(continuation)
    }
    for source in sources { source.cancel() }
    return received
}

/// Hands the first signal to the waiting continuation, whichever comes first.
private final class SignalOnce: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Int32, Never>?
        var received: Int32?
    }

    private let state = Mutex(State())

    func wait(_ continuation: CheckedContinuation<Int32, Never>) {
        let ready = state.withLock { state -> Int32? in
            if let received = state.received { return received }
            state.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func deliver(_ signal: Int32) {
        let continuation = state.withLock { state -> CheckedContinuation<Int32, Never>? in
            guard state.received == nil else { return nil }
            state.received = signal
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: signal)
    }
}
