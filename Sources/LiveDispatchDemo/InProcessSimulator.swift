import APNs
import APNsSimulator
import Crypto
import LiveDispatchWorker
import Logging
import NIOSSL

/// The APNs simulator `apns.endpoint: simulator` names, started in the
/// worker's process: it accepts every configured app, each (team, key)
/// pair signing with a key generated for the run.
public enum InProcessSimulator {
    /// What the simulator keeps of the pushes it accepts.
    public struct Options: Sendable {
        /// Where it records what each token received (JSONL).
        public var recordFile: String?
        /// Pushes it keeps in memory (newest first).
        public var historyLimit = 10_000
        /// Whether it keeps each token's count and last push
        /// (`received(by:)`); without, its history alone.
        public var tokenSummaries = true

        public init(recordFile: String? = nil) {
            self.recordFile = recordFile
        }
    }

    /// Starts the simulator for the apps of `configuration` and says how the
    /// worker reaches it; stopping the returned ``InProcessAPNs`` stops it.
    public static func start(
        _ configuration: WorkerConfiguration, options: Options, logger: Logger
    ) async throws -> (simulator: APNsSimulator, apns: InProcessAPNs) {
        let apps = configuration.resolvedApps
        var keys: [String: P256.Signing.PrivateKey] = [:]
        var accepted: [APNsSimulator.Configuration.App] = []
        for app in apps {
            let teamID = app.teamID.isEmpty ? "SIMULATOR1" : app.teamID
            let keyID = app.keyID.isEmpty ? "SIMKEY0001" : app.keyID
            let key = keys["\(teamID)/\(keyID)"] ?? P256.Signing.PrivateKey()
            keys["\(teamID)/\(keyID)"] = key
            accepted.append(.init(teamID: teamID, keyID: keyID, publicKey: key.publicKey, bundleID: app.bundleID))
        }
        guard let first = accepted.first else { throw WorkerStartError("apps: no app is configured") }
        var simulatorConfiguration = APNsSimulator.Configuration(
            teamID: first.teamID, keyID: first.keyID, publicKey: first.publicKey, bundleID: first.bundleID,
            recordFile: options.recordFile, historyLimit: options.historyLimit, threads: 1)
        simulatorConfiguration.otherApps = Array(accepted.dropFirst())
        simulatorConfiguration.tokenSummaries = options.tokenSummaries
        let simulator = try await APNsSimulator.start(configuration: simulatorConfiguration, logger: logger)
        var signingKeys: [String: APNsSigningKey] = [:]
        for (app, acceptedApp) in zip(apps, accepted) {
            guard let key = keys["\(acceptedApp.teamID)/\(acceptedApp.keyID)"] else { continue }
            signingKeys[app.name] = APNsSigningKey(privateKey: key, keyID: acceptedApp.keyID, teamID: acceptedApp.teamID)
        }
        let apns = InProcessAPNs(
            endpoint: .init(host: "127.0.0.1", port: simulator.port, serverName: "localhost"),
            trustRoots: try NIOSSLCertificate.fromPEMBytes(Array(simulator.certificate.certificatePEM.utf8)),
            signingKeys: signingKeys,
            stop: { try? await simulator.stop() })
        logger.notice("Started an in-process APNs simulator with a generated key", metadata: ["apns.port": "\(simulator.port)"])
        return (simulator, apns)
    }

    /// Starts the simulator when the worker asks for it.
    public static func factory(_ options: Options) -> InProcessAPNsFactory {
        { configuration, logger in try await start(configuration, options: options, logger: logger).apns }
    }
}
