import APNs
import Foundation
import LiveDispatchCore
import Logging
import NIOSSL

extension Worker {
    /// Where the broadcast channel management API of `environment` is for
    /// `app`: its own `endpoints` address, else `apns.endpoint`'s — Apple's
    /// `api-manage-broadcast` hosts for `production` and `sandbox`, the
    /// same address for `host:port` (the simulator serves both APIs on one
    /// port).
    public static func channelManagementEndpoint(
        of app: WorkerConfiguration.App, apnsEndpoint: String, environment: APNsEnvironment
    ) throws(WorkerStartError) -> APNsClientConfiguration.Endpoint {
        let text = app.endpoint(environment).isEmpty ? apnsEndpoint : app.endpoint(environment)
        switch text {
        case "production", "sandbox":
            return environment == .sandbox ? .channelManagementSandbox : .channelManagementProduction
        case "simulator":
            throw WorkerStartError(
                "apns.endpoint: the in-process simulator lives only inside a running worker; give the address (host:port) of a simulator started with `livedispatch simulate apns`")
        default:
            guard let (host, port) = WorkerConfiguration.hostAndPort(text, ports: 1...65535) else {
                throw WorkerStartError("the endpoint \(text.debugDescription) of app \(app.name) is not production, sandbox or host:port")
            }
            return .init(host: host, port: port)
        }
    }

    /// The app `name` names (`apps:`), or the only app when it is nil.
    public static func app(_ configuration: WorkerConfiguration, named name: String?) throws(WorkerStartError) -> WorkerConfiguration.App {
        let apps = configuration.resolvedApps
        let names = apps.map(\.name).joined(separator: ", ")
        guard let name else {
            guard apps.count == 1, let only = apps.first else {
                throw WorkerStartError("this configuration sends for several apps (\(names)); name one")
            }
            return only
        }
        guard let app = apps.first(where: { $0.name == name }) else {
            throw WorkerStartError("\(name.debugDescription) is not an app of this configuration (known: \(names))")
        }
        return app
    }

    /// A pool to the channel management API of `environment`, signed with
    /// the app's key and trusting the configured roots, and the client of
    /// the app's bundle over it. Shut the pool down when done.
    public static func makeChannelClient(
        _ configuration: WorkerConfiguration, app: WorkerConfiguration.App, environment: APNsEnvironment, logger: Logger
    ) throws -> (BroadcastChannelClient, APNsConnectionPool) {
        let apns = configuration.apns
        let endpoint = try channelManagementEndpoint(of: app, apnsEndpoint: apns.endpoint, environment: environment)
        let trustRoots = try Self.trustRoots(apns)
        let signingKey = try Self.signingKey(of: app)
        let pool = try APNsConnectionPool(
            configuration: APNsClientConfiguration(
                endpoint: endpoint, connections: 1, requestTimeout: apns.requestTimeout, additionalTrustRoots: trustRoots),
            signingKey: signingKey, logger: logger)
        return (BroadcastChannelClient(pool: pool, bundleID: app.bundleID), pool)
    }

    /// The certificates of `apns.trust_roots`, read from their PEM files.
    static func trustRoots(_ apns: WorkerConfiguration.APNs) throws(WorkerStartError) -> [NIOSSLCertificate] {
        var trustRoots: [NIOSSLCertificate] = []
        for path in apns.trustRoots {
            do {
                trustRoots += try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw WorkerStartError("apns.trust_roots: \(path) is not a readable PEM certificate file (\(error))")
            }
        }
        return trustRoots
    }

    /// The app's provider token signing key, read from its `.p8` file.
    static func signingKey(of app: WorkerConfiguration.App) throws -> APNsSigningKey {
        let pem: String
        do {
            pem = try String(contentsOfFile: app.keyPath, encoding: .utf8)
        } catch {
            throw WorkerStartError("the key of app \(app.name) (\(app.keyPath)) cannot be read (\(error.localizedDescription))")
        }
        return try APNsSigningKey(pemRepresentation: pem, keyID: app.keyID, teamID: app.teamID)
    }
}
