import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTracing
import Tracing
import LiveDispatchWorker
import Logging
import NIOCore
import OpenAPIHummingbird
import ServiceLifecycle
import Synchronization

/// The worker's one HTTP server (Hummingbird, HTTP/1.1): `GET /healthz`
/// (the process runs), `GET /readyz` (every assigned partition is restored;
/// 503 while not), `GET /metrics` (Prometheus text), `GET /status`
/// (partitions owned, records in progress, paused or not), the ingest API of
/// `openapi.yaml` under `/v1/` (the ingest routes, `POST /v1/rules/explain`,
/// `GET /v1/activities/{id}`, `GET /v1/dead-letters`, `POST /v1/dead-letters/{id}/replay`),
/// its document at `/v1/openapi.json`, and the web console at `/` (``ConsoleAssets``).
/// The read routes need no key when the server is bound to a loopback address.
///
/// Hostile clients are bounded: `http.max_connections` connections are
/// served at once (the rest wait in the listen backlog, holding no file
/// descriptor of ours), at most `http.max_connections_per_address` from one
/// client address, the idle ones closed first when every slot is taken
/// (``ConnectionAdmission``); idle connections close after `http.idle_timeout`,
/// slow heads and bodies after `http.header_timeout` and `http.request_timeout`
/// (2 s and 10 s once more than half of the slots are taken); a request its
/// key refuses is answered before its body is read; bodies are refused on
/// GET routes and above `http.max_body_bytes`.
public struct WorkerHTTPServer: Service {
    /// Produces the Prometheus exposition text.
    public typealias Exposition = @Sendable () -> [UInt8]

    /// What the health routes report.
    public struct Health: Sendable {
        public var isReady: @Sendable () -> Bool
        /// The `/status` document.
        public var status: @Sendable () -> String
        /// What `/readyz` says while not ready.
        public var notReady: String

        public init(isReady: @escaping @Sendable () -> Bool, status: @escaping @Sendable () -> String, notReady: String = "restoring") {
            self.isReady = isReady
            self.status = status
            self.notReady = notReady
        }
    }

    private let application: Application<RouterResponder<BasicRequestContext>>
    /// The listener of `admin.probe_listen`, when there is one.
    private let probeApplication: Application<RouterResponder<BasicRequestContext>>?

    /// The server of a running worker: its dispatcher's health, its producer for the ingest API.
    /// `onListening` is told the bound port once the server accepts connections.
    public init(components: WorkerComponents, exposition: Exposition?, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        let dispatcher = components.dispatcher
        let configuration = components.configuration
        let producer = components.producer
        // One read of Kafka at a time across the read routes, the others queued one per caller.
        let gate = ScanGate()
        var scrape: Exposition?
        if let exposition {
            scrape = { @Sendable in
                dispatcher.recordBacklog()
                return exposition()
            }
        }
        try self.init(
            listen: components.configuration.admin.listen, probeListen: components.configuration.admin.probeListen,
            configuration: components.configuration.http,
            health: Health(
                isReady: { dispatcher.isReady },
                status: { [router = components.router] in
                    let status = dispatcher.status
                    let routing = router.status
                    return "{\"phase\":\"\(dispatcher.phase.rawValue)\",\"partitions\":\(status.partitions),\"restoring\":\(status.restoring),\"owned\":\(status.owned),\"lingering\":\(status.lingering),\"releasing\":\(status.releasing),\"in_progress\":\(status.outstanding),\"paused\":\(status.paused),\"routing\":\(Self.byTopic(routing.assigned)),\"handing_over\":\(Self.byTopic(routing.handingOver)),\"ready\":\(dispatcher.isReady)}\n"
                }),
            exposition: scrape,
            topics: .init(
                commands: configuration.topic(.commands), tokens: configuration.topic(.tokens), state: configuration.topic(.state),
                tokenStore: configuration.topic(.tokenStore), deadLetters: configuration.topic(.deadLetters),
                channels: configuration.topic(.channels)),
            // A traced request's context goes on in the record's headers.
            produce: { topic, key, value in
                let headers = WorkerTracing.headers(InstrumentationContext.current?.traceContext)
                _ = try await producer.send(topic: topic, key: key, value: value, headers: headers)
            },
            rules: { [rules = components.rules] in rules.current },
            readTopic: Self.topicReader(client: components.kafka, logger: components.logger, gate: gate),
            apps: configuration.appDirectory,
            brazeApps: BrazeApps(configuration.resolvedApps.map { .init(name: $0.name, bundleID: $0.bundleID, brazeAppID: $0.brazeAppID) }),
            currentState: { dispatcher.activityState($0) },
            hasNoState: Self.noStateReader(dispatcher: dispatcher, client: components.kafka, topic: configuration.topic(.commands), logger: components.logger),
            owner: OwnerReads(
                reads: OwnedPartitionReads(dispatcher),
                partitionCount: AdminPartitionCount(client: components.kafka, topic: configuration.topic(.commands), logger: components.logger)),
            rulesDiff: WorkerAPI.RulesDiffSource(
                rulesDirectory: configuration.rules.path, maxEventBytes: configuration.limits.maxEventBytes,
                read: Self.timeReader(client: components.kafka, logger: components.logger, gate: gate),
                readBudget: configuration.http.rulesDiffRead, adminBudget: configuration.http.rulesDiffAdmin),
            logger: components.logger, tracer: components.tracing?.tracer, onListening: onListening)
    }

    /// `{"topic":[partition, …], …}`, topics in order.
    static func byTopic(_ partitions: [TopicPartition]) -> String {
        let topics = Dictionary(grouping: partitions, by: \.topic)
        let members = topics.keys.sorted().map { topic in
            "\(JSONValue.string(topic).description):\(topics[topic, default: []].map(\.partition).sorted())"
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// A server with its collaborators given as functions.
    /// `onListening` is told the bound port (useful with port 0).
    init(
        listen: String, probeListen: String = "", configuration: WorkerConfiguration.HTTP, health: Health, exposition: Exposition?,
        topics: WorkerAPI.Topics,
        produce: @escaping @Sendable (_ topic: String, _ key: [UInt8], _ value: [UInt8]) async throws -> Void,
        rules: @escaping @Sendable () -> RuleSet,
        readTopic: @escaping WorkerAPI.ReadTopic, apps: AppDirectory = .unchecked, brazeApps: BrazeApps = BrazeApps(),
        currentState: @escaping @Sendable (ActivityID) -> ActivityState? = { _ in nil },
        hasNoState: @escaping @Sendable (ActivityID) async -> Bool = { _ in false },
        owner: OwnerReads? = nil,
        rulesDiff: WorkerAPI.RulesDiffSource? = nil, logger: Logger, tracer: LiveDispatchTracer? = nil, onListening: @escaping @Sendable (Int) async -> Void = { _ in },
        onProbeListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws {
        let (host, port, probe) = try Self.addresses(listen: listen, probeListen: probeListen)
        let api = WorkerAPI(
            topics: topics, produce: produce, makeID: { UUID().uuidString.lowercased() }, rules: rules, readTopic: readTopic, apps: apps, brazeApps: brazeApps,
            currentState: currentState, hasNoState: hasNoState, owner: owner, rulesDiff: rulesDiff)
        let (router, _) = try Self.router(
            api: api, configuration: configuration, openReads: APIKeyTable.isLoopback(host: host), health: health, exposition: exposition, logger: logger,
            tracer: tracer)

        self.init(
            router: router, host: host, port: port, listen: listen, probe: probe, probeListen: probeListen, configuration: configuration,
            health: health, exposition: exposition, logger: logger, onListening: onListening, onProbeListening: onProbeListening)
    }

    /// The server of a worker still waiting for Kafka
    /// (``WorkerWaitingComponents``): the health routes alone, `/readyz`
    /// 503, `/status` saying why Kafka cannot be reached; every other route
    /// answers 503 `unavailable` with `Retry-After`.
    public init(waiting components: WorkerWaitingComponents, exposition: Exposition?, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        let configuration = components.configuration
        let (host, port, probe) = try Self.addresses(listen: configuration.admin.listen, probeListen: configuration.admin.probeListen)
        let status = components.status
        let health = Health(
            isReady: { false },
            status: {
                let failure = status.lastFailure.map { ",\"kafka_error\":\(JSONValue.string($0).description)" } ?? ""
                return "{\"phase\":\"connecting\",\"kafka_attempts\":\(status.attempts)\(failure),\"ready\":false}\n"
            },
            notReady: "waiting for Kafka")
        let router = Hummingbird.Router(context: BasicRequestContext.self)
        router.add(middleware: RequestHygieneMiddleware())
        router.add(middleware: ErrorResponseMiddleware(logger: components.logger))
        router.add(middleware: BodyLimitMiddleware(maxBytes: 0))
        let handlers = Self.healthHandlers(health: health, exposition: exposition)
        router.add(middleware: HealthRoutesOnly(paths: Set(handlers.map(\.0))))
        for (path, handler) in handlers { router.get(RouterPath(path), use: handler) }
        self.init(
            router: router, host: host, port: port, listen: configuration.admin.listen, probe: probe,
            probeListen: configuration.admin.probeListen, configuration: configuration.http, health: health, exposition: exposition,
            logger: components.logger, onListening: onListening, onProbeListening: { _ in })
    }

    /// The addresses of `admin.listen` and `admin.probe_listen` (none when empty).
    /// The web console's address for a server bound to `listen` (`host:port`
    /// or `[ipv6]:port`) and listening on `port`: a wildcard host is reached
    /// on loopback, an IPv6 host in brackets.
    public static func consoleAddress(listen: String, port: Int) -> String {
        let host = WorkerConfiguration.hostAndPort(listen, ports: 0...65535)?.host ?? "127.0.0.1"
        let reached =
            switch host {
            case "", "0.0.0.0": "127.0.0.1"
            case "::": "::1"
            default: host
            }
        return "http://\(reached.contains(":") ? "[\(reached)]" : reached):\(port)/"
    }

    static func addresses(listen: String, probeListen: String) throws -> (host: String, port: Int, probe: (host: String, port: Int)?) {
        guard let (host, port) = WorkerConfiguration.hostAndPort(listen, ports: 0...65535) else {
            throw WorkerStartError("admin.listen: expected host:port or [ipv6]:port, got \(listen.debugDescription)")
        }
        var probe: (host: String, port: Int)?
        if !probeListen.isEmpty {
            guard let address = WorkerConfiguration.hostAndPort(probeListen, ports: 0...65535) else {
                throw WorkerStartError("admin.probe_listen: expected host:port or [ipv6]:port, got \(probeListen.debugDescription)")
            }
            probe = address
        }
        return (host, port, probe)
    }

    private init(
        router: Hummingbird.Router<BasicRequestContext>, host: String, port: Int, listen: String, probe: (host: String, port: Int)?,
        probeListen: String, configuration: WorkerConfiguration.HTTP, health: Health, exposition: Exposition?, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void, onProbeListening: @escaping @Sendable (Int) async -> Void
    ) {
        // The loader keeps timeouts within 10 ms…24 h; a configuration built
        // in code is held to the same range rather than trapping on conversion.
        func bounded(_ seconds: Double) -> Duration { .milliseconds(Int64(min(max(seconds.isNaN ? 60 : seconds, 0.01), 86_400) * 1000)) }
        let header = bounded(configuration.headerTimeout), request = bounded(configuration.requestTimeout)
        let ledger = ConnectionLedger(limits: .init(
            maxConnections: max(1, configuration.maxConnections), maxPerAddress: max(1, configuration.maxConnectionsPerAddress),
            headerTimeout: header, requestTimeout: request))
        let channel = HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestDeadlineHandler(headerTimeout: header, requestTimeout: request, ledger: ledger)],
            idleTimeout: TimeAmount(bounded(configuration.idleTimeout)),
            httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100))
        application = Application(
            router: router,
            server: HTTPServerBuilder { responder in FairHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: channel), ledger: ledger) },
            configuration: ApplicationConfiguration(
                address: .hostname(host, port: port), serverName: "livedispatch",
                // A flood's handshakes wait in the kernel (up to net.core.somaxconn)
                // rather than crowd out an honest client's.
                backlog: 4096,
                availableConnectionsDelegate: MaximumAvailableConnections(max(1, configuration.maxConnections))),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                logger.notice("HTTP server listening", metadata: ["admin.address": "\(listen)", "http.port": "\(bound)"])
                await onListening(bound)
            },
            logger: logger)
        probeApplication = probe.map { probe in
            let router = Hummingbird.Router(context: BasicRequestContext.self)
            router.add(middleware: RequestHygieneMiddleware())
            router.add(middleware: ErrorResponseMiddleware(logger: logger))
            router.add(middleware: BodyLimitMiddleware(maxBytes: 0))
            Self.addHealthRoutes(to: router, health: health, exposition: exposition)
            // Probes send small heads and nothing else: their connections get short timeouts.
            let channel = HTTP1Channel.Configuration(
                additionalChannelHandlers: [RequestDeadlineHandler(headerTimeout: .seconds(2), requestTimeout: .seconds(2))],
                idleTimeout: .seconds(10),
                httpDecoderConfiguration: .init(maxHeaderFieldSize: 4 * 1024, maxHeaderListSize: 8 * 1024, maxHeaderFieldCount: 50))
            return Application(
                router: router,
                server: .http1(configuration: channel),
                configuration: ApplicationConfiguration(
                    address: .hostname(probe.host, port: probe.port), serverName: "livedispatch",
                    availableConnectionsDelegate: MaximumAvailableConnections(64)),
                onServerRunning: { channel in
                    let bound = channel.localAddress?.port ?? probe.port
                    logger.notice("HTTP probe listener listening", metadata: ["admin.probe_address": "\(probeListen)", "http.port": "\(bound)"])
                    await onProbeListening(bound)
                },
                logger: logger)
        }
    }

    /// The server's router, with every route registered through a
    /// ``GuardedRouter`` (returned too, for its list of routes).
    static func router(
        api: WorkerAPI, configuration: WorkerConfiguration.HTTP, openReads: Bool, health: Health, exposition: Exposition?, logger: Logger,
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }, tracer: LiveDispatchTracer? = nil
    ) throws -> (Hummingbird.Router<BasicRequestContext>, GuardedRouter) {
        let router = Hummingbird.Router(context: BasicRequestContext.self)
        let methods = RouteMethods()
        router.add(middleware: RequestHygieneMiddleware())
        if let tracer { router.add(middleware: TracingMiddleware(tracer: tracer)) }
        router.add(middleware: ErrorResponseMiddleware(logger: logger))
        router.add(middleware: MethodMiddleware(methods: methods))
        let gate = AccessGate(
            table: APIKeyTable(configuration.apiKeys, openReads: openReads),
            limiter: RateLimiter(rate: configuration.rateLimit, burst: configuration.rateBurst), clock: clock)
        router.add(middleware: AccessBeforeBodyMiddleware(methods: methods, gate: gate))
        router.add(middleware: BodyLimitMiddleware(maxBytes: configuration.maxBodyBytes))
        let routes = try GuardedRouter(router: router, gate: gate, methods: methods)
        Self.addHealthRoutes(to: routes, health: health, exposition: exposition)
        ConsoleAssets.addRoutes(to: routes)
        routes.open(.get, "/v1/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        try api.registerHandlers(on: routes)
        return (router, routes)
    }

    /// One topic read at a time per worker (each opens Kafka clients and
    /// reads partitions to their end); the others wait their turn in
    /// arrival order, one per caller (``ScanQueue``). A caller whose read
    /// already runs or waits, or one that finds the queue full, is told to
    /// retry (429); one whose client leaves while waiting leaves the queue.
    final class ScanGate: Sendable {
        struct Busy: Error, CustomStringConvertible {
            var description: String
        }

        private struct State {
            var queue: ScanQueue
            var lastTicket: UInt64 = 0
            /// Waiting readers, by ticket.
            var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
            /// Tickets given their turn (or cancelled) before they started waiting.
            var woken: Set<UInt64> = []
            var cancelled: Set<UInt64> = []
        }

        private let state: Mutex<State>

        init(capacity: Int = 32) {
            state = Mutex(State(queue: ScanQueue(capacity: capacity)))
        }

        /// Returns once it is the caller's turn, with the ticket to leave with.
        func enter(caller: String) async throws(Busy) -> UInt64 {
            let (ticket, admission) = state.withLock { state in
                state.lastTicket += 1
                return (state.lastTicket, state.queue.enter(state.lastTicket, caller: caller))
            }
            switch admission {
            case .run: return ticket
            case .callerBusy: throw Busy(description: "a read of an internal topic by this caller is already running or waiting")
            case .full: throw Busy(description: "the queue of reads of internal topics is full")
            case .wait: break
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { state in
                        if state.woken.remove(ticket) != nil { return true }
                        state.waiters[ticket] = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard state.queue.cancel(ticket) else { return nil }
                    state.cancelled.insert(ticket)
                    guard let waiter = state.waiters.removeValue(forKey: ticket) else {
                        state.woken.insert(ticket)
                        return nil
                    }
                    return waiter
                }
                waiter?.resume()
            }
            if state.withLock({ $0.cancelled.remove(ticket) != nil }) { throw Busy(description: "the request was cancelled while it waited") }
            return ticket
        }

        /// The read of `ticket` is over: the next waiting caller's turn.
        func leave(_ ticket: UInt64) {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let next = state.queue.leave(ticket) else { return nil }
                guard let waiter = state.waiters.removeValue(forKey: next) else {
                    state.woken.insert(next)
                    return nil
                }
                return waiter
            }
            waiter?.resume()
        }
    }

    /// Whether the dispatcher can tell an activity has no state
    /// (``Dispatcher/holdsNoState(of:partition:)``), its partition found
    /// from `commands`' partition count, read once (the worker refuses to
    /// run when the co-partitioned topics' counts differ).
    static func noStateReader(
        dispatcher: Dispatcher, client: KafkaClientConfiguration, topic: String, logger: Logger
    ) -> @Sendable (ActivityID) async -> Bool {
        let known = PartitionCount()
        return { activity in
            var count = known.value
            if count == nil {
                count = try? await KafkaAdmin(configuration: client, logger: logger).partitionCount(topic: topic, timeout: .seconds(2))
                if let count, count > 0 { known.value = count }
            }
            guard let count, count > 0 else { return false }
            return dispatcher.holdsNoState(of: activity, partition: Murmur2Partitioner.partition(forKey: activity.rawValue, partitionCount: count))
        }
    }

    /// A partition count, once read.
    final class PartitionCount: Sendable {
        private let count = Mutex<Int?>(nil)
        var value: Int? {
            get { count.withLock { $0 } }
            set { count.withLock { $0 = newValue } }
        }
    }

    /// Reads a topic's chosen partitions to their end with the partition
    /// reader (no consumer group); a partition the topic lacks reads nothing.
    static func topicReader(client: KafkaClientConfiguration, logger: Logger, gate: ScanGate) -> WorkerAPI.ReadTopic {
        { topic, partitions, body in
            let ticket = try await gate.enter(caller: RequestCaller.current?.name ?? AccessGate.keylessReads)
            defer { gate.leave(ticket) }
            let count = try await KafkaAdmin(configuration: client, logger: logger).partitionCounts()[topic] ?? 0
            let chosen: [Int32] =
                switch partitions {
                case .all: Array(0..<Int32(clamping: count))
                case .number(let number): number < count ? [number] : []
                case .key(let key): count > 0 ? [Murmur2Partitioner.partition(forKey: key, partitionCount: count)] : []
                }
            let reader = KafkaPartitionReader(configuration: client, logger: logger)
            for partition in chosen {
                try await reader.readToEnd(topic: topic, partition: partition, timeout: .seconds(10)) { body($0) }
            }
        }
    }

    /// Reads every partition of the topics from a time on (the partition
    /// reader, by timestamp), at most a limit of records spread over the
    /// partitions, under the same gate as the other reads.
    static func timeReader(client: KafkaClientConfiguration, logger: Logger, gate: ScanGate) -> @Sendable ([String], Int64, Int, ([KafkaRecord]) throws -> Void) async throws -> Void {
        { topics, since, limit, body in
            let ticket = try await gate.enter(caller: RequestCaller.current?.name ?? AccessGate.keylessReads)
            defer { gate.leave(ticket) }
            let counts = try await KafkaAdmin(configuration: client, logger: logger).partitionCounts()
            let partitions = topics.flatMap { topic in
                (0..<Int32(clamping: counts[topic] ?? 0)).map { TopicPartition(topic: topic, partition: $0) }
            }
            let reader = KafkaPartitionReader(configuration: client, logger: logger)
            try await reader.readSample(partitions, since: since, limit: limit, timeout: .seconds(10)) { try body($0) }
        }
    }

    public func run() async throws {
        guard let probeApplication else {
            try await application.run()
            return
        }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await application.run() }
            group.addTask { try await probeApplication.run() }
        }
    }

    static func text(_ status: HTTPResponse.Status, _ contentType: String, _ bytes: [UInt8]) -> Response {
        Response(status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// `/healthz`, `/readyz`, `/metrics` and `/status`, open to anyone.
    static func addHealthRoutes(to routes: GuardedRouter, health: Health, exposition: Exposition?) {
        for (path, handler) in healthHandlers(health: health, exposition: exposition) { routes.open(.get, path, handler) }
    }

    /// The same routes on the probe listener, which has nothing else.
    static func addHealthRoutes(to router: Hummingbird.Router<BasicRequestContext>, health: Health, exposition: Exposition?) {
        for (path, handler) in healthHandlers(health: health, exposition: exposition) { router.get(RouterPath(path), use: handler) }
    }

    static func healthHandlers(health: Health, exposition: Exposition?) -> [(String, @Sendable (Request, BasicRequestContext) async throws -> Response)] {
        [
            ("/healthz", { _, _ in Self.text(.ok, "text/plain", Array("ok\n".utf8)) }),
            ("/readyz", { _, _ in
                health.isReady() ? Self.text(.ok, "text/plain", Array("ready\n".utf8)) : Self.text(.serviceUnavailable, "text/plain", Array("\(health.notReady)\n".utf8))
            }),
            ("/metrics", { _, _ in Self.text(.ok, "text/plain; version=0.0.4", exposition?() ?? []) }),
            ("/status", { _, _ in Self.text(.ok, "application/json", Array(health.status().utf8)) }),
        ]
    }
}

/// In front of the health routes of a worker waiting for Kafka: any other
/// path is answered 503 `unavailable`, since nothing behind it works yet.
struct HealthRoutesOnly<Context: RequestContext>: RouterMiddleware {
    /// The health routes' paths.
    let paths: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard paths.contains(request.uri.path) else {
            return APIError(
                status: .serviceUnavailable, code: "unavailable", message: "the worker has not reached Kafka yet; GET /status says why",
                retryAfter: 5
            ).response()
        }
        return try await next(request, context)
    }
}
