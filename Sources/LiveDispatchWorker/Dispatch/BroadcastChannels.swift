import APNs
import LiveDispatchCore
import Logging
import Synchronization

/// Performs the dispatcher's channel requests against APNs' broadcast
/// channel management API, one client per app and environment made on
/// first use (a worker without broadcast activities opens no connection to
/// it).
public final class BroadcastChannels: Sendable {
    /// How a channel request ended, for the partition that asked.
    public enum Report: Sendable {
        case created(ActivityID, channelID: String)
        case createFailed(ActivityID, reason: String, retryable: Bool)
        case deleted(ActivityID, ActivityChannel, failure: String?)
    }

    private enum Client: Sendable {
        case ready(BroadcastChannelClient, APNsConnectionPool)
        /// The configuration cannot reach the API (the in-process simulator, a bad key).
        case unavailable(String)
    }

    private let configuration: WorkerConfiguration
    private let logger: Logger
    private struct ClientKey: Hashable {
        /// nil: the only app.
        var app: String?
        var environment: APNsEnvironment
    }

    private let clients = Mutex<[ClientKey: Client]>([:])

    public init(configuration: WorkerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Starts `request` and returns at once; `done` gets its report.
    func perform(_ request: PartitionDispatcher.ChannelRequest, done: @escaping @Sendable (Report) -> Void) {
        switch request {
        case .create(let activity, let environment, let policy, let app):
            let key = ClientKey(app: app, environment: environment)
            guard case .ready(let client, _) = client(key) else {
                done(.createFailed(activity, reason: unavailableReason(key), retryable: false))
                return
            }
            Task {
                do throws(BroadcastChannelError) {
                    let channelID = try await client.create(storagePolicy: policy)
                    logger.info("Broadcast channel created", metadata: ["activity.id": "\(activity)", "apns.channel_id": "\(channelID)"])
                    done(.created(activity, channelID: channelID))
                } catch {
                    logger.warning("Creating a broadcast channel failed", metadata: ["activity.id": "\(activity)", "error": "\(error)"])
                    done(.createFailed(activity, reason: error.message, retryable: error.isRetryable))
                }
            }
        case .delete(let activity, let channel):
            let key = ClientKey(app: channel.app, environment: channel.environment)
            guard case .ready(let client, _) = client(key) else {
                done(.deleted(activity, channel, failure: unavailableReason(key)))
                return
            }
            Task {
                do throws(BroadcastChannelError) {
                    try await client.delete(channelID: channel.id)
                    logger.info("Broadcast channel deleted", metadata: ["activity.id": "\(activity)", "apns.channel_id": "\(channel.id)"])
                    done(.deleted(activity, channel, failure: nil))
                } catch {
                    done(.deleted(activity, channel, failure: error.message))
                }
            }
        }
    }

    private func client(_ key: ClientKey) -> Client {
        clients.withLock { clients in
            if let client = clients[key] { return client }
            let made: Client
            do {
                // An activity naming no app belongs to the only (or first) app.
                let app = try Worker.app(configuration, named: key.app ?? configuration.resolvedApps.first?.name)
                let (client, pool) = try Worker.makeChannelClient(configuration, app: app, environment: key.environment, logger: logger)
                made = .ready(client, pool)
            } catch {
                logger.error("Broadcast channels cannot be managed", metadata: ["error": "\(error)"])
                made = .unavailable("\(error)")
            }
            clients[key] = made
            return made
        }
    }

    private func unavailableReason(_ key: ClientKey) -> String {
        let stored = clients.withLock { $0[key] }
        let what = "the channel management API of \(key.environment.rawValue)" + (key.app.map { " for app \($0)" } ?? "")
        if case .unavailable(let reason)? = stored { return "\(what) is not reachable: \(reason)" }
        return "\(what) is not reachable"
    }

    /// Closes the connections made.
    func shutdown() async {
        let pools = clients.withLock { clients in
            clients.values.compactMap { client -> APNsConnectionPool? in if case .ready(_, let pool) = client { pool } else { nil } }
        }
        for pool in pools { await pool.shutdown() }
    }
}
