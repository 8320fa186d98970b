import Crypto
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// An imitation of APNs over HTTP/2 and TLS, for tests, the demo and
/// benchmarks: it checks requests and provider tokens as APNs documents,
/// answers with APNs statuses and reasons, records what each device token
/// received, and misbehaves on demand (``SimulatorFaults``).
///
/// ```swift
/// let simulator = try await APNsSimulator.start(configuration: .init(
///     teamID: "TEAM123456", keyID: "KEY1234567", publicKey: key.publicKey, bundleID: "com.example.app"))
/// // connect to https://127.0.0.1:\(simulator.port), trusting simulator.certificate.certificatePEM
/// try await simulator.stop()
/// ```
public final class APNsSimulator: Sendable {
    /// How the simulator listens and what it accepts.
    public struct Configuration: Sendable {
        /// Address to listen on; loopback by default.
        public var host: String
        /// Port; 0 picks a free one (read it from ``APNsSimulator/port``).
        public var port: Int
        public var teamID: String
        public var keyID: String
        /// The public half of the team's `.p8` key, to verify provider tokens.
        public var publicKey: P256.Signing.PublicKey
        /// The app's bundle id; Live Activity topics are `<bundle>.push-type.liveactivity`.
        public var bundleID: String
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` once a push has succeeded. Default 1000.
        public var maxConcurrentStreams: Int
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` until a push has succeeded: 1 as
        /// APNs does (the default); load generators that open many streams
        /// at once (h2load) need it as high as ``maxConcurrentStreams``.
        public var initialMaxConcurrentStreams: Int
        /// The TLS identity; nil generates a self-signed one at start.
        public var certificate: SimulatorCertificate?
        public var faults: SimulatorFaults
        /// A JSONL file receiving one line per accepted push; nil for none.
        public var recordFile: String?
        /// How many accepted pushes the in-process history keeps (the newest).
        /// Default 10,000.
        public var historyLimit: Int
        /// Whether each device token and channel keeps its count and last
        /// push (``tokens``, ``summary(for:)``). Default true; a benchmark of
        /// millions of distinct tokens that only counts pushes turns it off,
        /// so the simulator does not spend its time growing that table.
        public var tokenSummaries = true
        /// A connection may switch provider token at most this often, in
        /// seconds (APNs: 20 minutes, else 429 `TooManyProviderTokenUpdates`); nil turns the rule off.
        public var tokenUpdateInterval: Int64?
        /// The server's clock, Unix seconds; tests pass their own to check token expiry.
        public var clock: @Sendable () -> Double
        /// Event loop threads; default: one per core.
        public var threads: Int
        /// Broadcast channels the app may keep at once (APNs: 10,000 per app and environment).
        public var channelLimit: Int
        /// Further apps accepted beside the one above, each with its key
        /// (or sharing one): a provider token is checked against the key it
        /// names, and a push's topic must be a bundle of that key.
        public var otherApps: [App] = []

        /// An app the simulator accepts: its team, key and bundle id.
        public struct App: Sendable {
            public var teamID: String
            public var keyID: String
            public var publicKey: P256.Signing.PublicKey
            public var bundleID: String

            public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey, bundleID: String) {
                self.teamID = teamID
                self.keyID = keyID
                self.publicKey = publicKey
                self.bundleID = bundleID
            }
        }

        public init(
            host: String = "127.0.0.1", port: Int = 0, teamID: String, keyID: String,
            publicKey: P256.Signing.PublicKey, bundleID: String, maxConcurrentStreams: Int = 1000,
            initialMaxConcurrentStreams: Int = 1, certificate: SimulatorCertificate? = nil, faults: SimulatorFaults = SimulatorFaults(),
            recordFile: String? = nil, historyLimit: Int = 10_000, tokenUpdateInterval: Int64? = 1200,
            clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
            threads: Int = System.coreCount, channelLimit: Int = ChannelRegistry.appleLimit
        ) {
            self.channelLimit = channelLimit
            self.host = host
            self.port = port
            self.teamID = teamID
            self.keyID = keyID
            self.publicKey = publicKey
            self.bundleID = bundleID
            self.maxConcurrentStreams = maxConcurrentStreams
            self.initialMaxConcurrentStreams = initialMaxConcurrentStreams
            self.certificate = certificate
            self.faults = faults
            self.recordFile = recordFile
            self.historyLimit = historyLimit
            self.tokenUpdateInterval = tokenUpdateInterval
            self.clock = clock
            self.threads = threads
        }
    }

    /// The port the simulator listens on.
    public let port: Int
    /// The host it listens on.
    public let host: String
    /// The TLS identity served; trust `certificate.certificatePEM`.
    public let certificate: SimulatorCertificate
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    private let state: SimulatorState
    private let logger: Logger

    private init(
        host: String, port: Int, certificate: SimulatorCertificate, group: MultiThreadedEventLoopGroup,
        serverChannel: any Channel, state: SimulatorState, logger: Logger
    ) {
        self.host = host
        self.port = port
        self.certificate = certificate
        self.group = group
        self.serverChannel = serverChannel
        self.state = state
        self.logger = logger
    }

    /// Starts listening; returns once the socket is bound.
    public static func start(
        configuration: Configuration, logger: Logger = Logger(label: "livedispatch.simulator")
    ) async throws(SimulatorError) -> APNsSimulator {
        try configuration.faults.validate()
        guard (1...Int(UInt32.max)).contains(configuration.maxConcurrentStreams) else {
            throw .invalidConfiguration(
                "max concurrent streams must be at least 1, not \(configuration.maxConcurrentStreams)")
        }
        guard (1...configuration.maxConcurrentStreams).contains(configuration.initialMaxConcurrentStreams) else {
            throw .invalidConfiguration(
                "the initial max concurrent streams (\(configuration.initialMaxConcurrentStreams)) must be between 1 and the max concurrent streams (\(configuration.maxConcurrentStreams))")
        }
        guard !configuration.bundleID.isEmpty, !configuration.otherApps.contains(where: \.bundleID.isEmpty) else {
            throw .invalidConfiguration("the bundle id is empty")
        }
        let certificate: SimulatorCertificate
        if let given = configuration.certificate {
            certificate = given
        } else {
            certificate = try SimulatorCertificate.generate()
        }
        let tls = try makeTLSContext(certificate)
        let recorder = try PushRecorder(
            historyLimit: configuration.historyLimit, recordFile: configuration.recordFile, tokenSummaries: configuration.tokenSummaries)
        let state = SimulatorState(faults: configuration.faults, recorder: recorder, channelLimit: configuration.channelLimit)
        let rules = APNsRequestRules(
            bundleID: configuration.bundleID,
            verifier: ProviderTokenVerifier(
                teamID: configuration.teamID, keyID: configuration.keyID, publicKey: configuration.publicKey),
            tokenUpdateInterval: configuration.tokenUpdateInterval,
            others: configuration.otherApps.map {
                ($0.bundleID, ProviderTokenVerifier(teamID: $0.teamID, keyID: $0.keyID, publicKey: $0.publicKey))
            })
        let maxStreams = UInt32(configuration.maxConcurrentStreams)
        let initialMaxStreams = UInt32(configuration.initialMaxConcurrentStreams)
        let clock = configuration.clock
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(configuration.threads, 1))
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handlers: [any ChannelHandler] = [
                        NIOSSLServerHandler(context: tls),
                        APNsConnectionHandler(
                            rules: rules, maxConcurrentStreams: maxStreams,
                            initialMaxConcurrentStreams: initialMaxStreams, state: state, clock: clock,
                            logger: logger),
                    ]
                    try channel.pipeline.syncOperations.addHandlers(handlers)
                }
            }
        let serverChannel: any Channel
        do {
            serverChannel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        } catch {
            try? await group.shutdownGracefully()
            throw .startFailed(
                "cannot listen on \(configuration.host):\(configuration.port): \(error); choose another port or 0")
        }
        let port = serverChannel.localAddress?.port ?? configuration.port
        logger.info("simulator listening", metadata: ["simulator.host": "\(configuration.host)", "simulator.port": "\(port)"])
        return APNsSimulator(
            host: configuration.host, port: port, certificate: certificate, group: group,
            serverChannel: serverChannel, state: state, logger: logger)
    }

    private static func makeTLSContext(_ certificate: SimulatorCertificate) throws(SimulatorError) -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMBytes(Array(certificate.certificatePEM.utf8))
            let key = try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            configuration.applicationProtocols = ["h2"]
            configuration.minimumTLSVersion = .tlsv12
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw .invalidCertificate("cannot use the TLS certificate or key: \(error); give a PEM certificate and its PEM private key")
        }
    }

    /// Closes the listener and every connection, then stops the event loops.
    public func stop() async throws {
        try? await serverChannel.close()
        for channel in state.openChannels {
            try? await channel.close()
        }
        await state.recorder.flush()
        try await group.shutdownGracefully()
    }

    /// Waits until the listener closes (after ``stop()``).
    public func waitUntilClosed() async throws {
        try await serverChannel.closeFuture.get()
    }

    // MARK: Faults

    /// The faults in force.
    public var faults: SimulatorFaults { state.faults }

    /// Replaces the faults; applies to the next request on every connection.
    public func setFaults(_ faults: SimulatorFaults) throws(SimulatorError) {
        try faults.validate()
        state.faults = faults
    }

    /// Makes `deviceToken` (hex) answer 410 `Unregistered` with `timestamp` (Unix ms).
    public func unregister(deviceToken: String, timestamp: Int64) {
        let hex = deviceToken.lowercased()
        state.updateFaults { $0.unregisteredTokens[hex] = timestamp }
    }

    // MARK: What was received

    /// Pushes accepted so far, over the whole server.
    public var acceptedCount: Int { state.recorder.acceptedCount }

    /// Accepted pushes in order of arrival (the newest `historyLimit`).
    public var pushes: [RecordedPush] { state.recorder.history }

    /// Accepted pushes numbered after `sequence` (``RecordedPush/sequence``),
    /// in order of arrival (of the newest `historyLimit`).
    public func pushes(after sequence: Int) -> [RecordedPush] { state.recorder.history(after: sequence) }

    /// Accepted pushes for one device token (hex), in order of arrival.
    public func pushes(for deviceToken: String) -> [RecordedPush] {
        state.recorder.history(for: deviceToken.lowercased())
    }

    /// How many pushes a token received and the last one; nil if none.
    public func received(by deviceToken: String) -> TokenHistory? {
        state.recorder.summary(for: deviceToken.lowercased())
    }

    /// Every token that received a push, with its count and last push.
    public var tokens: [String: TokenHistory] { state.recorder.tokens }

    /// Broadcasts received per channel id: how many and the last.
    public var broadcasts: [String: TokenHistory] { state.recorder.channels }

    /// The broadcast channels that exist now, in order of creation.
    public var channelIDs: [String] { state.withChannels { $0.channelIDs } }

    /// Forgets what was recorded (not the JSONL file).
    public func resetRecording() { state.recorder.reset() }

    // MARK: Connections

    /// Every connection so far, open or closed, in order of acceptance.
    public var connections: [ConnectionSnapshot] { state.snapshots }

    /// The most streams any connection had open at once.
    public var peakConcurrentStreams: Int { state.snapshots.map(\.peakConcurrentStreams).max() ?? 0 }
}
