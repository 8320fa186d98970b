import APNs
import Foundation
import LiveDispatchCore

/// Sends pushes through the APNs pool of each send's (app, environment) and
/// turns APNs' answer into what the fan-out needs. Pools are shared: one
/// per (host, key, bundle id) — APNs binds a connection's team and bundle
/// by its first push, so two apps signing with one key keep connections of
/// their own even to one host.
public struct PushSender: Sendable {
    /// Where one app's pushes of one environment go.
    public struct Route: Sendable {
        public var pool: APNsConnectionPool
        public var bundleID: String

        public init(pool: APNsConnectionPool, bundleID: String) {
            self.pool = pool
            self.bundleID = bundleID
        }
    }

    struct RouteKey: Hashable {
        var app: String
        var environment: APNsEnvironment
    }

    let routes: [RouteKey: Route]
    /// The app of sends that name none (the only app, or the first).
    let defaultApp: String
    private let apnsIDs = APNsIDSequence()

    /// `routes` by app name, then environment; `defaultApp` takes sends
    /// whose token names no app.
    public init(routes: [String: [APNsEnvironment: Route]], defaultApp: String) {
        var flat: [RouteKey: Route] = [:]
        for (app, byEnvironment) in routes {
            for (environment, route) in byEnvironment { flat[RouteKey(app: app, environment: environment)] = route }
        }
        self.routes = flat
        self.defaultApp = defaultApp
    }

    /// One app sending to one pool (e.g. a simulator) for both environments.
    public init(pool: APNsConnectionPool, bundleID: String, app: String = AppDirectory.defaultName) {
        let route = Route(pool: pool, bundleID: bundleID)
        self.init(routes: [app: [.production: route, .sandbox: route]], defaultApp: app)
    }

    func route(_ send: PartitionDispatcher.Send) -> Route? {
        routes[RouteKey(app: send.app ?? defaultApp, environment: send.environment)]
    }

    func request(_ send: PartitionDispatcher.Send, _ route: Route) -> APNsRequest {
        // To the device token, or to the activity's broadcast channel; its
        // expiration counted from now, when it is sent.
        send.request(bundleID: route.bundleID, apnsID: apnsIDs.next(), now: UnixTime(seconds: Date().timeIntervalSince1970))
    }

    /// What a send of an app this worker has no route for ends as: refused
    /// for good, and not counted among the pushes APNs answered.
    static func unrouted(_ send: PartitionDispatcher.Send) -> SendResult {
        SendResult(
            outcome: .permanent(reason: "no APNs route for app \((send.app ?? "").debugDescription) in \(send.environment.rawValue); configure it under apps:"),
            label: nil)
    }

    /// Starts a batch of sends and returns at once; `onOutcome` is called
    /// once per send with its index, from the APNs pools' event loops (or at
    /// once for a send no pool serves).
    func submit(_ sends: [PartitionDispatcher.Send], onOutcome: @escaping @Sendable (Int, SendResult) -> Void) {
        var batches: [ObjectIdentifier: (pool: APNsConnectionPool, requests: [APNsRequest], positions: [Int])] = [:]
        for (index, send) in sends.enumerated() {
            guard let route = route(send) else {
                onOutcome(index, Self.unrouted(send))
                continue
            }
            let id = ObjectIdentifier(route.pool)
            batches[id, default: (route.pool, [], [])].requests.append(request(send, route))
            batches[id]?.positions.append(index)
        }
        for batch in batches.values {
            let positions = batch.positions
            let apnsIDs = batch.requests.map(\.apnsID)
            batch.pool.submit(batch.requests) { index, outcome in
                var result = Self.classify(outcome)
                result.apnsID = apnsIDs[index]
                onOutcome(positions[index], result)
            }
        }
    }

    /// APNs' answer as the fan-out and the metrics take it.
    static func classify(_ answer: APNsOutcome) -> SendResult {
        let outcome: FanOut.Outcome
        var misconfiguration: APNsError?
        var status: Int?
        switch answer {
        case .delivered:
            outcome = .delivered
            status = 200
        case .tokenInvalid(let reason, _):
            outcome = .tokenInvalid(reason: reason.description)
        case .permanent(let answered, let reason):
            outcome = .permanent(reason: "\(answered) \(reason)")
            status = answered
        case .retryable(let failure):
            status = failure.status
            let reason = failure.reason.map { "\(failure.status.map(String.init) ?? "") \($0)".trimmingCharacters(in: .whitespaces) } ?? failure.error.description
            outcome = .retryable(reason: reason, after: failure.retryAfter)
        case .misconfigured(let error):
            // Nothing can succeed until an operator fixes the key or topic:
            // back off and retry, and dead-letter when retries run out.
            outcome = .retryable(reason: "misconfigured: \(error)", after: nil)
            misconfiguration = error
        }
        return SendResult(outcome: outcome, label: answer.label, misconfiguration: misconfiguration, status: status)
    }

    /// Records each pool's gauges as they are now (``APNsConnectionPool/recordGauges()``).
    func recordGauges() {
        var seen: Set<ObjectIdentifier> = []
        for route in routes.values where seen.insert(ObjectIdentifier(route.pool)).inserted {
            route.pool.recordGauges()
        }
    }

    func shutdown() async {
        var seen: Set<ObjectIdentifier> = []
        for route in routes.values where seen.insert(ObjectIdentifier(route.pool)).inserted {
            await route.pool.shutdown()
        }
    }
}

/// One send's result, classified once by ``PushSender``: the outcome the
/// fan-out acts on, and what the worker's metrics and logs record of it.
struct SendResult: Sendable, Hashable {
    var outcome: FanOut.Outcome
    /// The `outcome` label of `livedispatch_pushes_total`
    /// (``APNsOutcome/label``); nil for a send no APNs pool took (its app
    /// has no route), which is not counted.
    var label: String?
    /// Why APNs refuses every push until an operator fixes the key, team,
    /// topic or environment; nil for any other answer.
    var misconfiguration: APNsError?
    /// The HTTP status APNs answered, when it answered with one the
    /// outcome keeps (traces record it).
    var status: Int?
    /// The `apns-id` the request was sent with (APNs echoes it).
    var apnsID: String?
}
