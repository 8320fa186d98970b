import APNs
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import Logging
import Synchronization
import NIOSSL
import ServiceLifecycle

/// Why the worker refused to start: what is wrong and what to do.
public struct WorkerStartError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The parts of a running worker that the services its caller adds are
/// built from: the HTTP server (in its own target, `LiveDispatchHTTP`, which
/// the caller of ``Worker/start(configuration:options:logger:metrics:http:waitingHTTP:)``
/// links) and the demo's replay.
public struct WorkerComponents: Sendable {
    public let configuration: WorkerConfiguration
    public let dispatcher: Dispatcher
    public let router: Router
    /// The worker's producer: what the ingest API accepts goes to Kafka through it.
    public let producer: KafkaProducer
    /// The rules in force (hot reloads included).
    public let rules: RuleSetStore
    /// How to reach Kafka (e.g. to read the dead-letters topic).
    public let kafka: KafkaClientConfiguration
    public let logger: Logger
    /// The worker's tracing, nil when it is off: the ingest API continues
    /// the traces of its requests into the records it writes.
    public let tracing: WorkerTracing?
}

/// Makes the worker's HTTP server, started with the other services when `admin.listen` is set.
public typealias WorkerHTTPServerFactory = @Sendable (WorkerComponents) throws -> any Service

/// Makes a service the worker runs after its own (the demo's replay).
public typealias WorkerServiceFactory = @Sendable (WorkerComponents) throws -> ServiceGroupConfiguration.ServiceConfiguration

/// An APNs server in the worker's own process, the one `apns.endpoint:
/// simulator` names (`LiveDispatchDemo` starts the APNs simulator): where
/// it listens, the certificate to trust, each app's signing key, and how to
/// stop it, which the worker does once its APNs connections have closed.
public struct InProcessAPNs: Sendable {
    public var endpoint: APNsClientConfiguration.Endpoint
    public var trustRoots: [NIOSSLCertificate]
    /// By app name; an app without one gets no route.
    public var signingKeys: [String: APNsSigningKey]
    public var stop: @Sendable () async -> Void

    public init(
        endpoint: APNsClientConfiguration.Endpoint, trustRoots: [NIOSSLCertificate], signingKeys: [String: APNsSigningKey],
        stop: @escaping @Sendable () async -> Void
    ) {
        self.endpoint = endpoint
        self.trustRoots = trustRoots
        self.signingKeys = signingKeys
        self.stop = stop
    }
}

/// Starts the in-process APNs server for a worker's configuration.
public typealias InProcessAPNsFactory = @Sendable (WorkerConfiguration, Logger) async throws -> InProcessAPNs

/// Builds a worker from its configuration and runs it: the router and
/// dispatcher stages, the producer they share, the HTTP server, an
/// in-process Kafka mock cluster for `kafka.bootstrap: embedded`, and what
/// its caller adds (``Options``).
public final class Worker: Sendable {
    /// What the caller adds: the demo (`LiveDispatchDemo`) gives its APNs
    /// simulator, its console and its replay this way.
    public struct Options: Sendable {
        /// Starts the APNs server `apns.endpoint: simulator` names; without
        /// it, that endpoint is refused.
        public var inProcessAPNs: InProcessAPNsFactory?
        /// Sees what the dispatcher does and every dead letter, the router's included.
        public var observer: Dispatcher.Observer?
        /// Services started after the others and stopped before them.
        public var services: [WorkerServiceFactory]

        public init(inProcessAPNs: InProcessAPNsFactory? = nil, observer: Dispatcher.Observer? = nil, services: [WorkerServiceFactory] = []) {
            self.inProcessAPNs = inProcessAPNs
            self.observer = observer
            self.services = services
        }
    }

    public let configuration: WorkerConfiguration
    let logger: Logger
    let services: [ServiceGroupConfiguration.ServiceConfiguration]
    public let dispatcher: Dispatcher
    public let router: Router
    let producer: KafkaProducer
    let sender: PushSender
    private let group: ServiceGroup
    /// With `apns.endpoint: simulator`: stopped after the APNs connections close.
    private let inProcessAPNs: InProcessAPNs?
    // Declared last so it is released after every client of it (stored
    // properties are destroyed in declaration order).
    let embeddedCluster: EmbeddedKafkaCluster?
    /// The Kafka bootstrap servers in use (the embedded cluster's when embedded).
    public let bootstrapServers: String

    public static func start(
        configuration: WorkerConfiguration, options: Options = Options(), logger: Logger,
        metrics: WorkerMetrics = WorkerMetrics(), http: WorkerHTTPServerFactory? = nil,
        waitingHTTP: WorkerWaitingHTTPServerFactory? = nil
    ) async throws -> Worker {
        let rules: RuleSetStore
        do {
            rules = try RuleSetStore(directory: configuration.rules.path)
        } catch {
            throw WorkerStartError("the rules in \(configuration.rules.path) have problems; run `livedispatch rules check \(configuration.rules.path)`:\n\(error)")
        }

        // Kafka: the embedded mock cluster or the configured brokers.
        var embeddedCluster: EmbeddedKafkaCluster?
        let bootstrap: String
        if configuration.kafka.bootstrap == "embedded" {
            let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            embeddedCluster = cluster
            bootstrap = cluster.bootstrapServers
            logger.notice("Started an embedded Kafka cluster (data is not kept)", metadata: ["kafka.bootstrap": "\(bootstrap)"])
        } else {
            bootstrap = configuration.kafka.bootstrap
        }
        var properties = configuration.kafka.properties
        if embeddedCluster != nil, properties["log_level"] == nil {
            // The mock brokers announce an old protocol version, which makes
            // librdkafka warn about every metadata request.
            properties["log_level"] = "3"
        }
        if embeddedCluster != nil {
            properties.merge(WorkerConfiguration.embeddedClusterConsumerProperties) { given, _ in given }
        }
        let client = KafkaClientConfiguration(
            bootstrapServers: bootstrap.split(separator: ",").map(String.init), clientID: "livedispatch",
            properties: properties)
        let outcomesTopic = OutcomesTopicPresence()
        try await reachKafka(configuration: configuration, waitingHTTP: waitingHTTP, logger: logger) { [rules = rules.current, embeddedCluster] in
            let present = try await prepareTopics(configuration, rules: rules, client: client, embedded: embeddedCluster, logger: logger)
            outcomesTopic.present.store(present, ordering: .releasing)
        }

        // APNs: an in-process simulator, a simulator elsewhere, or Apple.
        let (sender, inProcessAPNs) = try await makeSender(configuration, inProcessAPNs: options.inProcessAPNs, logger: logger)

        var producerConfiguration = KafkaProducerConfiguration(client: client)
        producerConfiguration.idempotent = true
        producerConfiguration.linger = .milliseconds(2)
        producerConfiguration.maxQueuedRecords = 1_000_000
        // Commands and snapshots are JSON with the same keys record after
        // record: lz4 shrinks a batch several times over for little CPU, and
        // a broker spends less on fewer bytes (a fifth less for one sharing
        // the worker's cores, BENCHMARKS.md). `kafka.properties`
        // `compression.type` overrides it. Registrations stay uncompressed:
        // a restarting worker restoring a million of them compressed peaked
        // near 520 MB against 270 MB.
        producerConfiguration.compression = .lz4
        producerConfiguration.topicCompression[configuration.topic(.tokenStore)] = KafkaProducerConfiguration.Compression.none
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger, flushTimeout: .seconds(configuration.shutdown.timeout))
        // Without this the first command of a run waited about a second in
        // librdkafka for the leader of `commands`: the p99 of a short run.
        do {
            try await producer.prepare(topics: InternalTopic.required.map(configuration.topic))
        } catch {
            logger.warning("The producer could not look up its topics yet; the first records will wait for it", metadata: ["error": "\(error)"])
        }

        metrics.registerQuietSeries()
        let tracing = WorkerTracing(configuration: configuration, logger: logger, metrics: metrics.factory)
        if let tracing {
            logger.notice("Tracing on", metadata: [
                "otlp.endpoint": "\(tracing.exporter.client.endpoint)", "tracing.sampler": "\(configuration.tracing.sampler)",
                "tracing.sampling_ratio": "\(configuration.tracing.samplingRatio)",
            ])
        }
        let webhooks = try WebhookSender(configuration: configuration.webhooks, logger: logger, metrics: metrics.factory)
        var webhook: (@Sendable (_ id: String, _ body: [UInt8]) -> Void)?
        if let webhooks {
            logger.notice("Outcomes are sent to a webhook", metadata: ["webhook.endpoint": "\(webhooks.endpoint)"])
            webhook = { id, body in webhooks.deliver(id: id, body: body) }
        }
        let dispatcher = try Dispatcher(
            configuration: configuration, client: client, producer: producer, sender: sender,
            channels: BroadcastChannels(configuration: configuration, logger: logger), logger: logger, metrics: metrics,
            observer: options.observer, tracing: tracing, types: rules, publishesOutcomes: outcomesTopic.present.load(ordering: .acquiring),
            webhook: webhook)
        let router = try Router(
            configuration: configuration, rules: rules, client: client, producer: producer, logger: logger, metrics: metrics,
            observer: options.observer.map { observer -> Router.Observer in { letter in observer(.deadLettered(letter)) } },
            downstream: dispatcher, tracing: tracing, kafka: LibrdkafkaClients())

        // Started in this order and shut down in reverse: the consumers stop
        // first, the dispatcher drains, the router's hand-over ends, the
        // producer flushes, and the span exporter sends what is left last.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: producer), .init(service: router.handOverService), .init(service: dispatcher), .init(service: router),
        ]
        if let tracing { services.insert(.init(service: tracing.exporter), at: 0) }
        // Stopped after the dispatcher, which hands it the last outcomes.
        if let webhooks { services.insert(.init(service: webhooks), at: 0) }
        let components = WorkerComponents(
            configuration: configuration, dispatcher: dispatcher, router: router, producer: producer, rules: rules, kafka: client,
            logger: logger, tracing: tracing)
        if !configuration.admin.listen.isEmpty, let http {
            services.append(.init(service: try http(components)))
        }
        services += try options.services.map { try $0(components) }
        return Worker(
            configuration: configuration, logger: logger, services: services, dispatcher: dispatcher, router: router,
            producer: producer, sender: sender, embeddedCluster: embeddedCluster, inProcessAPNs: inProcessAPNs, bootstrapServers: bootstrap)
    }

    init(
        configuration: WorkerConfiguration, logger: Logger, services: [ServiceGroupConfiguration.ServiceConfiguration],
        dispatcher: Dispatcher, router: Router,
        producer: KafkaProducer, sender: PushSender, embeddedCluster: EmbeddedKafkaCluster?, inProcessAPNs: InProcessAPNs?,
        bootstrapServers: String
    ) {
        self.configuration = configuration
        self.logger = logger
        self.services = services
        self.dispatcher = dispatcher
        self.router = router
        self.producer = producer
        self.sender = sender
        self.embeddedCluster = embeddedCluster
        self.inProcessAPNs = inProcessAPNs
        self.bootstrapServers = bootstrapServers
        self.group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }

    /// Starts the same orderly shutdown as SIGTERM.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
    }

    /// Runs until SIGTERM or SIGINT (or the replay ends, when asked), then
    /// shuts down in reverse order: the consumers stop first, the dispatcher
    /// drains, the producer flushes, then the APNs connections close.
    public func run() async throws {
        do {
            try await group.run()
        } catch {
            await shutdownClients()
            throw error
        }
        await shutdownClients()
    }

    private func shutdownClients() async {
        await sender.shutdown()
        await dispatcher.channels?.shutdown()
        await inProcessAPNs?.stop()
    }

    // MARK: Topics

    static func prepareTopics(
        _ configuration: WorkerConfiguration, rules: RuleSet, client: KafkaClientConfiguration, embedded: EmbeddedKafkaCluster?,
        logger: Logger
    ) async throws -> Bool {
        let admin = try KafkaAdmin(configuration: client, logger: logger)
        if configuration.kafka.createTopics || embedded != nil {
            var specifications = InternalTopic.allCases.map { topic in
                KafkaTopicSpecification(
                    name: configuration.topic(topic), partitions: configuration.kafka.partitions,
                    replicationFactor: configuration.kafka.replicationFactor,
                    config: topic.isCompacted ? ["cleanup.policy": "compact"] : [:])
            }
            if let embedded {
                // Nobody else creates the domain topics of an embedded cluster,
                // and its mock brokers take topics through their own API.
                specifications += rules.topics.sorted().map {
                    KafkaTopicSpecification(name: $0, partitions: configuration.kafka.partitions, replicationFactor: 1)
                }
                for specification in specifications {
                    try embedded.createTopic(specification.name, partitions: specification.partitions)
                }
            } else {
                let created = try await admin.createTopics(specifications)
                if !created.isEmpty { logger.notice("Created topics", metadata: ["kafka.topics": "\(created.sorted())"]) }
            }
        }
        return try await checkPartitions(
            configuration, admin: admin, created: configuration.kafka.createTopics || embedded != nil, logger: logger)
    }

    /// Refuses to start unless `commands`, `tokens`, `state`,
    /// `token-store` and `starts` exist with one partition count.
    /// Returns whether the `outcomes` topic exists (a worker without it
    /// runs, and says so).
    @discardableResult
    static func checkPartitions(
        _ configuration: WorkerConfiguration, admin: KafkaAdmin, created: Bool = false, logger: Logger
    ) async throws -> Bool {
        var counts: [String: Int] = [:]
        var attempt = 0
        // Topics just created are waited for; `outcomes` only then.
        let awaited = created ? InternalTopic.allCases : InternalTopic.required
        while true {
            counts = try await admin.partitionCounts()
            let names = awaited.map { configuration.topic($0) }
            if names.allSatisfy({ counts[$0] != nil }) || attempt >= 12 { break }
            attempt += 1
            try await Task.sleep(for: .seconds(Backoff.topicMetadata.ceiling(attempt: attempt)))
        }
        let coPartitioned = InternalTopic.coPartitioned.map { configuration.topic($0) }
        let missing = InternalTopic.required.map { configuration.topic($0) }.filter { counts[$0] == nil }
        if !missing.isEmpty {
            throw WorkerStartError(
                "topics \(missing.joined(separator: ", ")) do not exist; create them (commands, tokens, state, token-store and starts with the same partition count; state and token-store compacted) or set kafka.create_topics: true")
        }
        let distinct = Set(coPartitioned.compactMap { counts[$0] })
        if distinct.count > 1 {
            let listing = coPartitioned.map { "\($0) has \(counts[$0] ?? 0)" }.joined(separator: ", ")
            throw WorkerStartError(
                "the co-partitioned topics must have the same number of partitions, but \(listing); recreate them with one count so every activity's commands, tokens and state, and every audience's tokens and starts, meet in one partition")
        }
        let outcomes = configuration.topic(.outcomes)
        guard counts[outcomes] != nil else {
            logger.warning(
                "The outcomes topic does not exist: what becomes of pushes is not published; create it or set kafka.create_topics: true",
                metadata: ["kafka.topic": "\(outcomes)"])
            return false
        }
        return true
    }

    // MARK: APNs

    static func makeSender(
        _ configuration: WorkerConfiguration, inProcessAPNs: InProcessAPNsFactory?, logger: Logger
    ) async throws -> (PushSender, InProcessAPNs?) {
        let apns = configuration.apns
        let trustRoots = try Self.trustRoots(apns)
        func clientConfiguration(_ endpoint: APNsClientConfiguration.Endpoint) -> APNsClientConfiguration {
            APNsClientConfiguration(
                endpoint: endpoint, connections: apns.connections, maxQueued: max(1000, configuration.limits.maxInFlightPerWorker),
                requestTimeout: apns.requestTimeout, additionalTrustRoots: trustRoots)
        }
        let apps = configuration.resolvedApps
        guard let first = apps.first else { throw WorkerStartError("apps: no app is configured") }
        // One pool per (host, key, bundle): APNs binds a connection's team
        // and bundle by its first push.
        var pools = APNsPools(logger: logger)
        var routes: [String: [APNsEnvironment: PushSender.Route]] = [:]

        if apns.endpoint == "simulator" {
            guard let inProcessAPNs else {
                throw WorkerStartError(
                    "apns.endpoint: the in-process simulator is started by `livedispatch run`; elsewhere give the address (host:port) of a simulator started with `livedispatch simulate apns`")
            }
            let server = try await inProcessAPNs(configuration, logger)
            var client = clientConfiguration(server.endpoint)
            client.additionalTrustRoots += server.trustRoots
            for app in apps {
                guard let signingKey = server.signingKeys[app.name] else { continue }
                let route = PushSender.Route(pool: try pools.pool(client, signingKey, bundleID: app.bundleID), bundleID: app.bundleID)
                routes[app.name] = [.production: route, .sandbox: route]
            }
            return (PushSender(routes: routes, defaultApp: first.name), server)
        }

        for app in apps {
            let signingKey = try Self.signingKey(of: app)
            for environment in APNsEnvironment.allCases {
                let endpoint = try Self.endpoint(of: app, environment, apnsEndpoint: apns.endpoint)
                let pool = try pools.pool(clientConfiguration(endpoint), signingKey, bundleID: app.bundleID)
                routes[app.name, default: [:]][environment] = PushSender.Route(pool: pool, bundleID: app.bundleID)
            }
        }
        return (PushSender(routes: routes, defaultApp: first.name), nil)
    }

    /// Where an app's pushes of one environment go: its own `endpoints`
    /// override, else Apple's host (`apns.endpoint` production or
    /// sandbox), else the `host:port` of `apns.endpoint`.
    static func endpoint(
        of app: WorkerConfiguration.App, _ environment: APNsEnvironment, apnsEndpoint: String
    ) throws -> APNsClientConfiguration.Endpoint {
        let text = app.endpoint(environment).isEmpty ? apnsEndpoint : app.endpoint(environment)
        if text == "production" || text == "sandbox" {
            return environment == .sandbox ? .sandbox : .production
        }
        guard let (host, port) = WorkerConfiguration.hostAndPort(text, ports: 1...65535) else {
            throw WorkerStartError("apps.\(app.name).endpoints.\(environment.rawValue): \(text.debugDescription) is not host:port")
        }
        return .init(host: host, port: port)
    }
}

/// The APNs pools of one worker, shared by (endpoint, team, key, bundle).
struct APNsPools {
    struct Key: Hashable {
        var endpoint: APNsClientConfiguration.Endpoint
        var teamID: String
        var keyID: String
        var bundleID: String
    }

    let logger: Logger
    private var pools: [Key: APNsConnectionPool] = [:]

    init(logger: Logger) { self.logger = logger }

    mutating func pool(_ configuration: APNsClientConfiguration, _ signingKey: APNsSigningKey, bundleID: String) throws -> APNsConnectionPool {
        let key = Key(endpoint: configuration.endpoint, teamID: signingKey.teamID, keyID: signingKey.keyID, bundleID: bundleID)
        if let pool = pools[key] { return pool }
        let pool = try APNsConnectionPool(configuration: configuration, signingKey: signingKey, logger: logger)
        pools[key] = pool
        return pool
    }
}

/// Whether the `outcomes` topic was found when Kafka was reached.
private final class OutcomesTopicPresence: Sendable {
    let present = Atomic(false)
}
