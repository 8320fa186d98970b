import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Kafka
import LiveDispatchCore
import LiveDispatchRules
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
/// descriptor of ours), idle connections close after `http.idle_timeout`,
/// slow heads and bodies after `http.header_timeout` and `http.request_timeout`,
/// bodies are refused on GET routes and above `http.max_body_bytes`.
public struct WorkerHTTPServer: Service {
    /// Produces the Prometheus exposition text.
    public typealias Exposition = @Sendable () -> [UInt8]

    /// What the health routes report.
    public struct Health: Sendable {
        public var isReady: @Sendable () -> Bool
        /// The `/status` document.
        public var status: @Sendable () -> String

        public init(isReady: @escaping @Sendable () -> Bool, status: @escaping @Sendable () -> String) {
            self.isReady = isReady
            self.status = status
        }
    }

    private let application: Application<RouterResponder<BasicRequestContext>>

    /// The server of a running worker: its dispatcher's health, its producer for the ingest API.
    /// `onListening` is told the bound port once the server accepts connections.
    public init(components: WorkerHTTPComponents, exposition: Exposition?, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        let dispatcher = components.dispatcher
        let configuration = components.configuration
        let producer = components.producer
        var scrape: Exposition?
        if let exposition {
            scrape = { @Sendable in
                dispatcher.recordBacklog()
                return exposition()
            }
        }
        try self.init(
            listen: components.configuration.admin.listen, configuration: components.configuration.http,
            health: Health(
                isReady: { dispatcher.isReady },
                status: {
                    let status = dispatcher.status
                    return "{\"phase\":\"\(dispatcher.phase.rawValue)\",\"partitions\":\(status.partitions),\"in_progress\":\(status.outstanding),\"paused\":\(status.paused),\"ready\":\(dispatcher.isReady)}\n"
                }),
            exposition: scrape,
            topics: .init(
                commands: configuration.topic(.commands), tokens: configuration.topic(.tokens), state: configuration.topic(.state),
                tokenStore: configuration.topic(.tokenStore), deadLetters: configuration.topic(.deadLetters)),
            produce: { topic, key, value in _ = try await producer.send(topic: topic, key: key, value: value) },
            rules: { [rules = components.rules] in rules.current },
            readTopic: Self.topicReader(client: components.kafka, logger: components.logger),
            apps: configuration.appDirectory, logger: components.logger, onListening: onListening)
    }

    /// A server with its collaborators given as functions.
    /// `onListening` is told the bound port (useful with port 0).
    init(
        listen: String, configuration: WorkerConfiguration.HTTP, health: Health, exposition: Exposition?,
        topics: WorkerAPI.Topics,
        produce: @escaping @Sendable (_ topic: String, _ key: [UInt8], _ value: [UInt8]) async throws -> Void,
        rules: @escaping @Sendable () -> RuleSet,
        readTopic: @escaping WorkerAPI.ReadTopic, apps: AppDirectory = .unchecked,
        logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws {
        let parts = listen.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]), (0...65535).contains(port) else {
            throw WorkerStartError("admin.listen: expected host:port, got \(listen.debugDescription)")
        }
        let router = Hummingbird.Router(context: BasicRequestContext.self)
        router.add(middleware: ErrorResponseMiddleware(logger: logger))
        router.add(middleware: AccessMiddleware(
            table: APIKeyTable(configuration.apiKeys, openReads: APIKeyTable.isLoopback(host: String(parts[0]))),
            limiter: RateLimiter(rate: configuration.rateLimit, burst: configuration.rateBurst)))
        router.add(middleware: BodyLimitMiddleware(maxBytes: configuration.maxBodyBytes))
        Self.addHealthRoutes(to: router, health: health, exposition: exposition)
        ConsoleAssets.addRoutes(to: router)
        router.get("/v1/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        let api = WorkerAPI(
            topics: topics, produce: produce, makeID: { UUID().uuidString.lowercased() }, rules: rules, readTopic: readTopic, apps: apps)
        try api.registerHandlers(on: router)

        // The loader keeps timeouts within 10 ms…24 h; a configuration built
        // in code is held to the same range rather than trapping on conversion.
        func bounded(_ seconds: Double) -> Duration { .milliseconds(Int64(min(max(seconds.isNaN ? 60 : seconds, 0.01), 86_400) * 1000)) }
        let header = bounded(configuration.headerTimeout), request = bounded(configuration.requestTimeout)
        let channel = HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestDeadlineHandler(headerTimeout: header, requestTimeout: request)],
            idleTimeout: TimeAmount(bounded(configuration.idleTimeout)),
            httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100))
        let address = "\(parts[0]):\(port)"
        application = Application(
            router: router,
            server: .http1(configuration: channel),
            configuration: ApplicationConfiguration(
                address: .hostname(String(parts[0]), port: port), serverName: "livedispatch",
                availableConnectionsDelegate: MaximumAvailableConnections(max(1, configuration.maxConnections))),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                logger.notice("HTTP server listening", metadata: ["admin.address": "\(address)", "http.port": "\(bound)"])
                await onListening(bound)
            },
            logger: logger)
    }

    /// One topic read at a time per worker: each opens Kafka clients and
    /// reads partitions to their end, so a busy caller is told to retry (429).
    final class ScanGate: Sendable {
        struct Busy: Error, CustomStringConvertible {
            var description: String { "another read of an internal topic is running" }
        }

        private let running = Mutex(false)

        func enter() throws(Busy) {
            let entered = running.withLock { running in
                if running { return false }
                running = true
                return true
            }
            if !entered { throw Busy() }
        }

        func leave() { running.withLock { $0 = false } }
    }

    /// Reads a topic's chosen partitions to their end with the partition
    /// reader (no consumer group); a partition the topic lacks reads nothing.
    static func topicReader(client: KafkaClientConfiguration, logger: Logger) -> WorkerAPI.ReadTopic {
        let gate = ScanGate()
        return { topic, partitions, body in
            try gate.enter()
            defer { gate.leave() }
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

    public func run() async throws {
        try await application.run()
    }

    static func text(_ status: HTTPResponse.Status, _ contentType: String, _ bytes: [UInt8]) -> Response {
        Response(status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func addHealthRoutes(to router: Hummingbird.Router<BasicRequestContext>, health: Health, exposition: Exposition?) {
        router.get("/healthz") { _, _ in Self.text(.ok, "text/plain", Array("ok\n".utf8)) }
        router.get("/readyz") { _, _ in
            health.isReady() ? Self.text(.ok, "text/plain", Array("ready\n".utf8)) : Self.text(.serviceUnavailable, "text/plain", Array("restoring\n".utf8))
        }
        router.get("/metrics") { _, _ in Self.text(.ok, "text/plain; version=0.0.4", exposition?() ?? []) }
        router.get("/status") { _, _ in Self.text(.ok, "application/json", Array(health.status().utf8)) }
    }
}
