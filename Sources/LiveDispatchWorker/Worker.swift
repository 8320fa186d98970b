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
/// `LiveDispatchHTTP`, which the caller of ``Worker/start(configuration:options:logger:metrics:http:)`` links).
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
        metrics: WorkerMetrics = WorkerMetrics(), http: WorkerHTTPServerFactory? = nil
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
        try await prepareTopics(configuration, rules: rules.current, client: client, embedded: embeddedCluster, logger: logger)

        // APNs: an in-process simulator, a simulator elsewhere, or Apple.
        let (sender, simulator) = try await makeSender(configuration, options: options, logger: logger)

        var producerConfiguration = KafkaProducerConfiguration(client: client)
        producerConfiguration.idempotent = true
        producerConfiguration.linger = .milliseconds(2)
        producerConfiguration.maxQueuedRecords = 1_000_000
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
            assigned: { dispatcher.routerAssigned() })

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
        var trustRoots: [NIOSSLCertificate] = []
        for path in apns.trustRoots {
            do {
                trustRoots += try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw WorkerStartError("apns.trust_roots: \(path) is not a readable PEM certificate file (\(error))")
            }
        }
        func clientConfiguration(_ endpoint: APNsClientConfiguration.Endpoint) -> APNsClientConfiguration {
            APNsClientConfiguration(
                endpoint: endpoint, connections: apns.connections, maxQueued: max(1000, configuration.limits.maxInFlightPerActivity * 4),
                requestTimeout: apns.requestTimeout, additionalTrustRoots: trustRoots)
        }
        if apns.endpoint == "simulator" {
            let key = P256.Signing.PrivateKey()
            let teamID = apns.teamID.isEmpty ? "SIMULATOR1" : apns.teamID
            let keyID = apns.keyID.isEmpty ? "SIMKEY0001" : apns.keyID
            let simulator = try await APNsSimulator.start(
                configuration: .init(
                    teamID: teamID, keyID: keyID, publicKey: key.publicKey, bundleID: apns.bundleID,
                    recordFile: options.simulatorRecordFile, historyLimit: options.simulatorHistory, threads: 1),
                logger: logger)
            var client = clientConfiguration(.init(host: "127.0.0.1", port: simulator.port, serverName: "localhost"))
            client.additionalTrustRoots += try NIOSSLCertificate.fromPEMBytes(Array(simulator.certificate.certificatePEM.utf8))
            let pool = try APNsConnectionPool(
                configuration: client, signingKey: APNsSigningKey(privateKey: key, keyID: keyID, teamID: teamID), logger: logger)
            logger.notice("Started an in-process APNs simulator with a generated key", metadata: ["apns.port": "\(simulator.port)"])
            return (PushSender(production: pool, sandbox: pool, bundleID: apns.bundleID), simulator)
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: apns.keyPath, encoding: .utf8)
        } catch {
            throw WorkerStartError("apns.key_path: \(apns.keyPath) cannot be read (\(error.localizedDescription))")
        }
        let signingKey = try APNsSigningKey(pemRepresentation: pem, keyID: apns.keyID, teamID: apns.teamID)
        if apns.endpoint == "production" || apns.endpoint == "sandbox" {
            let production = try APNsConnectionPool(configuration: clientConfiguration(.production), signingKey: signingKey, logger: logger)
            let sandbox = try APNsConnectionPool(configuration: clientConfiguration(.sandbox), signingKey: signingKey, logger: logger)
            return (PushSender(production: production, sandbox: sandbox, bundleID: apns.bundleID), nil)
        }
        let parts = apns.endpoint.split(separator: ":")
        let pool = try APNsConnectionPool(
            configuration: clientConfiguration(.init(host: String(parts[0]), port: Int(parts[1]) ?? 443)), signingKey: signingKey, logger: logger)
        return (PushSender(production: pool, sandbox: pool, bundleID: apns.bundleID), nil)
    }
}
