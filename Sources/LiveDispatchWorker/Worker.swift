import APNs
import APNsSimulator
import Crypto
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import Logging
import NIOSSL
import ServiceLifecycle

/// Why the worker refused to start: what is wrong and what to do.
public struct WorkerStartError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What the worker's HTTP server is built from (it lives in its own target,
/// `LiveDispatchHTTP`, which the caller of ``Worker/start(configuration:options:logger:metrics:http:waitingHTTP:)`` links).
public struct WorkerHTTPComponents: Sendable {
    public let configuration: WorkerConfiguration
    public let dispatcher: Dispatcher
    /// The worker's producer: what the ingest API accepts goes to Kafka through it.
    public let producer: KafkaProducer
    /// The rules in force (hot reloads included).
    public let rules: RuleSetStore
    /// How to reach Kafka (e.g. to read the dead-letters topic).
    public let kafka: KafkaClientConfiguration
    public let logger: Logger
}

/// Makes the worker's HTTP server, started with the other services when `admin.listen` is set.
public typealias WorkerHTTPServerFactory = @Sendable (WorkerHTTPComponents) throws -> any Service

/// Builds a worker from its configuration and runs it: the router and
/// dispatcher stages, the producer they share, the HTTP server, and —
/// for `kafka.bootstrap: embedded` and `apns.endpoint: simulator` — an
/// in-process Kafka mock cluster and APNs simulator.
public final class Worker: Sendable {
    /// Extras for demos and tests.
    public struct Options: Sendable {
        /// Scenario files to publish while running (`Config/examples`).
        public var replay: String?
        /// Stop once the replay is published and everything it caused is done.
        public var exitAfterReplay = false
        /// Where the demo's lines go (standard output by default); nil prints nothing.
        public var console: (@Sendable (String) -> Void)?
        /// Where the in-process simulator records what each token received (JSONL).
        public var simulatorRecordFile: String?
        /// Pushes the in-process simulator keeps in memory (newest first).
        public var simulatorHistory = 10_000
        /// Whether the in-process simulator keeps each token's count and
        /// last push (`received(by:)`); without, its history alone.
        public var simulatorTokenSummaries = true

        public init(replay: String? = nil, exitAfterReplay: Bool = false, console: (@Sendable (String) -> Void)? = nil, simulatorRecordFile: String? = nil) {
            self.replay = replay
            self.exitAfterReplay = exitAfterReplay
            self.console = console
            self.simulatorRecordFile = simulatorRecordFile
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
    /// The in-process APNs simulator, with `apns.endpoint: simulator`.
    public let simulator: APNsSimulator?
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
        let client = KafkaClientConfiguration(
            bootstrapServers: bootstrap.split(separator: ",").map(String.init), clientID: "livedispatch",
            properties: properties)
        try await reachKafka(configuration: configuration, waitingHTTP: waitingHTTP, logger: logger) { [rules = rules.current, embeddedCluster] in
            try await prepareTopics(configuration, rules: rules, client: client, embedded: embeddedCluster, logger: logger)
        }

        // APNs: an in-process simulator, a simulator elsewhere, or Apple.
        let (sender, simulator) = try await makeSender(configuration, options: options, logger: logger)

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
            try await producer.prepare(topics: InternalTopic.allCases.map(configuration.topic))
        } catch {
            logger.warning("The producer could not look up its topics yet; the first records will wait for it", metadata: ["error": "\(error)"])
        }

        metrics.registerQuietSeries()
        let console = options.console
        let printer = console.map { ConsolePrinter(write: $0) }
        let dispatcher = try Dispatcher(
            configuration: configuration, client: client, producer: producer, sender: sender,
            channels: BroadcastChannels(configuration: configuration, logger: logger), logger: logger, metrics: metrics,
            observer: printer.map { printer -> Dispatcher.Observer in { observation in printer.observe(observation) } })
        let router = try Router(
            configuration: configuration, rules: rules, client: client, producer: producer, logger: logger, metrics: metrics,
            observer: printer.map { printer -> Router.Observer in { letter in printer.observe(.deadLettered(letter)) } },
            assigned: { dispatcher.routerAssigned() }, downstream: { dispatcher.backlog },
            commandWritten: { dispatcher.commandWritten($0) })

        // Started in this order and shut down in reverse: the consumers stop
        // first, the dispatcher drains, the producer flushes last.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: producer), .init(service: dispatcher), .init(service: router)]
        if !configuration.admin.listen.isEmpty, let http {
            let components = WorkerHTTPComponents(configuration: configuration, dispatcher: dispatcher, producer: producer, rules: rules, kafka: client, logger: logger)
            services.append(.init(service: try http(components)))
        }
        if let replay = options.replay {
            let scenario: Scenario
            do { scenario = try Scenario.load(path: replay) } catch { throw WorkerStartError("\(error)") }
            let replayer = ScenarioReplayer(
                scenario: scenario, configuration: configuration, producer: producer, dispatcher: dispatcher,
                exitWhenDone: options.exitAfterReplay, console: printer, logger: logger)
            // When the replay ends, the whole worker shuts down gracefully.
            services.append(.init(service: replayer, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        return Worker(
            configuration: configuration, logger: logger, services: services, dispatcher: dispatcher, router: router,
            producer: producer, sender: sender, embeddedCluster: embeddedCluster, simulator: simulator, bootstrapServers: bootstrap)
    }

    init(
        configuration: WorkerConfiguration, logger: Logger, services: [ServiceGroupConfiguration.ServiceConfiguration],
        dispatcher: Dispatcher, router: Router,
        producer: KafkaProducer, sender: PushSender, embeddedCluster: EmbeddedKafkaCluster?, simulator: APNsSimulator?,
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
        self.simulator = simulator
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
        try? await simulator?.stop()
    }

    // MARK: Topics

    static func prepareTopics(
        _ configuration: WorkerConfiguration, rules: RuleSet, client: KafkaClientConfiguration, embedded: EmbeddedKafkaCluster?,
        logger: Logger
    ) async throws {
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
        try await checkPartitions(configuration, admin: admin)
    }

    /// Refuses to start unless `commands`, `tokens`, `state`,
    /// `token-store` and `starts` exist with one partition count.
    static func checkPartitions(_ configuration: WorkerConfiguration, admin: KafkaAdmin) async throws {
        var counts: [String: Int] = [:]
        var attempt = 0
        while true {
            counts = try await admin.partitionCounts()
            let names = InternalTopic.allCases.map { configuration.topic($0) }
            if names.allSatisfy({ counts[$0] != nil }) || attempt >= 20 { break }
            attempt += 1
            try await Task.sleep(for: .milliseconds(250))  // metadata of just-created topics can lag
        }
        let coPartitioned = InternalTopic.coPartitioned.map { configuration.topic($0) }
        let missing = InternalTopic.allCases.map { configuration.topic($0) }.filter { counts[$0] == nil }
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
    }

    // MARK: APNs

    static func makeSender(
        _ configuration: WorkerConfiguration, options: Options, logger: Logger
    ) async throws -> (PushSender, APNsSimulator?) {
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
            // Each (team, key) pair gets a generated key; the simulator accepts them all.
            var keys: [String: P256.Signing.PrivateKey] = [:]
            var accepted: [APNsSimulator.Configuration.App] = []
            for app in apps {
                let teamID = app.teamID.isEmpty ? "SIMULATOR1" : app.teamID
                let keyID = app.keyID.isEmpty ? "SIMKEY0001" : app.keyID
                let key = keys["\(teamID)/\(keyID)"] ?? P256.Signing.PrivateKey()
                keys["\(teamID)/\(keyID)"] = key
                accepted.append(.init(teamID: teamID, keyID: keyID, publicKey: key.publicKey, bundleID: app.bundleID))
            }
            var simulatorConfiguration = APNsSimulator.Configuration(
                teamID: accepted[0].teamID, keyID: accepted[0].keyID, publicKey: accepted[0].publicKey, bundleID: accepted[0].bundleID,
                recordFile: options.simulatorRecordFile, historyLimit: options.simulatorHistory, threads: 1)
            simulatorConfiguration.otherApps = Array(accepted.dropFirst())
            simulatorConfiguration.tokenSummaries = options.simulatorTokenSummaries
            let simulator = try await APNsSimulator.start(configuration: simulatorConfiguration, logger: logger)
            var client = clientConfiguration(.init(host: "127.0.0.1", port: simulator.port, serverName: "localhost"))
            client.additionalTrustRoots += try NIOSSLCertificate.fromPEMBytes(Array(simulator.certificate.certificatePEM.utf8))
            for (app, acceptedApp) in zip(apps, accepted) {
                guard let key = keys["\(acceptedApp.teamID)/\(acceptedApp.keyID)"] else { continue }
                let signingKey = APNsSigningKey(privateKey: key, keyID: acceptedApp.keyID, teamID: acceptedApp.teamID)
                let route = PushSender.Route(pool: try pools.pool(client, signingKey, bundleID: app.bundleID), bundleID: app.bundleID)
                routes[app.name] = [.production: route, .sandbox: route]
            }
            logger.notice("Started an in-process APNs simulator with a generated key", metadata: ["apns.port": "\(simulator.port)"])
            return (PushSender(routes: routes, defaultApp: first.name), simulator)
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
