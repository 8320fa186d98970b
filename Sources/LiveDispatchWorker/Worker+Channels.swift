import APNs
import Foundation
import LiveDispatchCore
import Logging
import NIOSSL

extension Worker {
    /// Where the broadcast channel management API of `environment` is for
    /// `apns.endpoint`: Apple's `api-manage-broadcast` hosts for `production`
    /// and `sandbox`, the same address for `host:port` (the simulator serves
    /// both APIs on one port).
    public static func channelManagementEndpoint(
        _ apns: WorkerConfiguration.APNs, environment: APNsEnvironment
    ) throws(WorkerStartError) -> APNsClientConfiguration.Endpoint {
        switch apns.endpoint {
        case "production", "sandbox":
            return environment == .sandbox ? .channelManagementSandbox : .channelManagementProduction
        case "simulator":
            throw WorkerStartError(
                "apns.endpoint: the in-process simulator lives only inside a running worker; give the address (host:port) of a simulator started with `livedispatch simulate apns`")
        default:
            guard let (host, port) = WorkerConfiguration.hostAndPort(apns.endpoint, ports: 1...65535) else {
                throw WorkerStartError("apns.endpoint: \(apns.endpoint.debugDescription) is not production, sandbox or host:port")
            }
            return .init(host: host, port: port)
        }
    }

    /// A pool to the channel management API of `environment`, signed with
    /// the configured key and trusting the configured roots, and the client
    /// of the app `bundleID` over it. Shut the pool down when done.
    public static func makeChannelClient(
        _ configuration: WorkerConfiguration, environment: APNsEnvironment, bundleID: String, logger: Logger
    ) throws -> (BroadcastChannelClient, APNsConnectionPool) {
        let apns = configuration.apns
        let endpoint = try channelManagementEndpoint(apns, environment: environment)
        var trustRoots: [NIOSSLCertificate] = []
        for path in apns.trustRoots {
            do {
                trustRoots += try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw WorkerStartError("apns.trust_roots: \(path) is not a readable PEM certificate file (\(error))")
            }
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: apns.keyPath, encoding: .utf8)
        } catch {
            throw WorkerStartError("apns.key_path: \(apns.keyPath) cannot be read (\(error.localizedDescription))")
        }
        let signingKey = try APNsSigningKey(pemRepresentation: pem, keyID: apns.keyID, teamID: apns.teamID)
        let pool = try APNsConnectionPool(
            configuration: APNsClientConfiguration(
                endpoint: endpoint, connections: 1, requestTimeout: apns.requestTimeout, additionalTrustRoots: trustRoots),
            signingKey: signingKey, logger: logger)
        return (BroadcastChannelClient(pool: pool, bundleID: bundleID), pool)
    }
}
