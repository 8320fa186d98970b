import Kafka
import LiveDispatchCore
import Logging
import ServiceLifecycle
import Synchronization

/// What a worker that has not reached Kafka yet reports through its HTTP
/// server: why the last attempt failed and how many were made.
public final class WorkerStartupStatus: Sendable {
    private let state = Mutex<(failure: String?, attempts: Int)>((nil, 0))

    public init() {}

    /// Why the last attempt to reach Kafka failed (the broker and the reason).
    public var lastFailure: String? { state.withLock { $0.failure } }
    /// Attempts made so far.
    public var attempts: Int { state.withLock { $0.attempts } }

    func failed(_ reason: String) {
        state.withLock { state in
            state.failure = reason
            state.attempts += 1
        }
    }
}

/// What the HTTP server of a worker still waiting for Kafka is built from.
public struct WorkerWaitingComponents: Sendable {
    public let configuration: WorkerConfiguration
    public let status: WorkerStartupStatus
    public let logger: Logger
}

/// Makes the HTTP server a worker serves while it waits for Kafka: health
/// routes only, `/readyz` answering 503.
public typealias WorkerWaitingHTTPServerFactory = @Sendable (WorkerWaitingComponents) throws -> any Service

/// The worker was asked to stop (SIGTERM, SIGINT) before it reached Kafka.
public struct WorkerStoppedBeforeStart: Error, Sendable, CustomStringConvertible {
    public var description: String { "stopped before Kafka could be reached" }
}

extension Worker {
    /// Runs `attempt` (create and check the topics) until it succeeds. While
    /// it fails because Kafka cannot be reached (a refused connection, a
    /// failed TLS handshake or SASL login, brokers that do not answer), the
    /// worker logs why, naming the broker, serves its health routes with
    /// `/readyz` 503 (`waitingHTTP`, when `admin.listen` is set), and tries
    /// again after ``Backoff/kafkaStartup``. SIGTERM or SIGINT ends the wait
    /// with ``WorkerStoppedBeforeStart``. Any other error (a missing topic,
    /// a property librdkafka rejects) is thrown at once.
    static func reachKafka(
        configuration: WorkerConfiguration, waitingHTTP: WorkerWaitingHTTPServerFactory?, logger: Logger,
        attempt: @escaping @Sendable () async throws -> Void
    ) async throws {
        do {
            try await attempt()
            return
        } catch let error as KafkaError where error.meansKafkaUnreachable {
            let status = WorkerStartupStatus()
            status.failed("\(error)")
            let waiter = KafkaWaiter(attempt: attempt, status: status, logger: logger)
            waiter.logFailure(error)
            var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
            if !configuration.admin.listen.isEmpty, let waitingHTTP {
                services.append(.init(service: try waitingHTTP(WorkerWaitingComponents(configuration: configuration, status: status, logger: logger))))
            }
            services.append(.init(service: waiter, successTerminationBehavior: .gracefullyShutdownGroup))
            let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
            if let failure = waiter.failure { throw failure }
            guard waiter.reached else { throw WorkerStoppedBeforeStart() }
            logger.notice("Kafka reached", metadata: ["kafka.attempts": "\(status.attempts + 1)"])
        }
    }
}

extension KafkaError {
    /// Whether the error says the brokers could not be reached or did not
    /// answer in time, which may pass (a broker starting, a secret mounted
    /// late), rather than that the configuration is wrong.
    var meansKafkaUnreachable: Bool { code == .metadata || code == .topicCreation }
}

/// Tries to reach Kafka again and again until it succeeds or the worker is
/// asked to stop.
private final class KafkaWaiter: Service, Sendable {
    let attempt: @Sendable () async throws -> Void
    let status: WorkerStartupStatus
    let logger: Logger
    private let succeeded = Atomic(false)
    private let stopped = Mutex<(any Error)?>(nil)

    init(attempt: @escaping @Sendable () async throws -> Void, status: WorkerStartupStatus, logger: Logger) {
        self.attempt = attempt
        self.status = status
        self.logger = logger
    }

    var reached: Bool { succeeded.load(ordering: .acquiring) }
    /// An error that waiting will not mend, which ends the wait.
    var failure: (any Error)? { stopped.withLock { $0 } }

    func logFailure(_ error: any Error) {
        let wait = Backoff.kafkaStartup.ceiling(attempt: status.attempts)
        logger.error(
            "Kafka cannot be reached; the worker is not ready and tries again",
            metadata: ["error": "\(error)", "kafka.attempts": "\(status.attempts)", "retry.in_seconds": "\(wait)"])
    }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: .seconds(Backoff.kafkaStartup.ceiling(attempt: self.status.attempts)))
                } catch {
                    return
                }
                do {
                    try await self.attempt()
                    self.succeeded.store(true, ordering: .releasing)
                    return
                } catch let error as KafkaError where error.meansKafkaUnreachable {
                    if Task.isCancelled { return }
                    self.status.failed("\(error)")
                    self.logFailure(error)
                } catch {
                    self.stopped.withLock { $0 = error }
                    return
                }
            }
        }
    }
}
