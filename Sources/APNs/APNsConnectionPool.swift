import Foundation
import LiveDispatchCore
import Logging
import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A source of the current time, injected so token renewal, request
/// deadlines and idle pings can be tested.
public protocol APNsClock: Sendable {
    func now() -> UnixTime
}

/// The wall clock.
public struct SystemAPNsClock: APNsClock {
    public init() {}
    public func now() -> UnixTime { UnixTime(seconds: Date().timeIntervalSince1970) }
}

/// The APNs client: a pool of HTTP/2 connections to one endpoint for one
/// team, with token auth.
///
/// ``send(_:)`` returns a classified ``APNsOutcome`` and never throws. The
/// pool re-sends requests the server did not process (`REFUSED_STREAM`,
/// GOAWAY) and retries once with a new token after `ExpiredProviderToken`;
/// every other retry is the caller's decision, from the outcome. When all
/// connections are busy and the queue is full, `send` waits: that wait is the
/// back-pressure. Call ``shutdown()`` before dropping the pool.
public final class APNsConnectionPool: Sendable {
    /// Counts that tests and health endpoints read.
    public struct Statistics: Sendable, Hashable {
        /// Streams open on all connections.
        public var inFlight: Int
        /// Requests held in the bounded queue (at most `maxQueued`).
        public var queued: Int
        /// Callers suspended in `send` because the queue was full.
        public var waiting: Int
        /// Connections by pool state.
        public var connections: [StateMachine.ConnectionState: Int]
        /// The stream limit applied to each connection now, by connection id.
        public var streamLimits: [Int: Int]
        /// Provider tokens signed so far.
        public var tokenRenewals: Int
    }

    /// Who waits for a request's outcome. Continuations are unchecked (a
    /// checked one allocates per push): each is resumed once, by whoever
    /// removes its request from `pending` under the lock.
    private enum Waiter: Sendable {
        case single(UnsafeContinuation<APNsOutcome, Never>)
        /// Wants the answer itself too (channel management reads its headers and body).
        case exchange(UnsafeContinuation<APNsExchange, Never>)
        case batch(BatchCollector, index: Int)
        case callback(@Sendable (Int, APNsOutcome) -> Void, index: Int)
    }

    /// What the shell keeps per request; every decision about it is the
    /// machine's. A class: looking one up under the lock costs one retain,
    /// not a copy of every field of the request.
    private final class Pending: Sendable {
        let request: APNsRequest
        let waiter: Waiter
        let startedAt: NIODeadline

        init(request: APNsRequest, waiter: Waiter, startedAt: NIODeadline) {
            self.request = request
            self.waiter = waiter
            self.startedAt = startedAt
        }
    }

    private struct State {
        var machine: StateMachine
        var pending: [Int: Pending] = [:]
        var connections: [Int: APNsConnection] = [:]
        /// Answers kept for requests whose waiter is ``Waiter/exchange(_:)``, until they complete.
        var answers: [Int: APNsResponse] = [:]
        /// The current connection attempt of each connection id: events of
        /// an earlier channel with the same id are dropped.
        var attempts: [Int: Int] = [:]
        var nextAttempt = 0
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        /// The one timer, armed at the machine's ``StateMachine/nextDeadline``.
        var timer = MachineTimer<Scheduled<Void>>()
        var isStopped = false
    }

    /// The I/O that the machine's actions call for, gathered under the lock
    /// and performed after it is released.
    private struct Effects {
        var executions: [(connection: APNsConnection, executions: [APNsConnection.Execution])] = []
        var finished: [(pending: Pending, outcome: APNsOutcome, answer: APNsResponse?, withoutResponse: Bool)] = []
        var connects: [Int] = []
        var reconnects: [(connection: Int, delay: Double)] = []
        var cancels: [(connection: APNsConnection, request: Int)] = []
        var pings: [APNsConnection] = []
        var closes: [APNsConnection] = []
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        /// A timer replaced by an earlier one, or no longer needed.
        var disarmed: Scheduled<Void>?
    }

    private let configuration: APNsClientConfiguration
    private let sslContext: NIOSSLContext
    private let eventLoopGroup: any EventLoopGroup
    private let clock: any APNsClock
    private let jitter: @Sendable () -> Double
    private let logger: Logger
    private let metrics: APNsMetrics
    private let state: Mutex<State>
    private let nextRequestID = Atomic<Int>(0)

    /// Creates the pool and starts opening its connections.
    ///
    /// - Parameters:
    ///   - clock: the time used for provider tokens, request deadlines and idle pings.
    ///   - jitter: uniform random numbers in 0..<1 for reconnect backoff.
    ///   - metricsFactory: where metrics go; the global one when nil.
    public init(
        configuration: APNsClientConfiguration, signingKey: APNsSigningKey,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: any APNsClock = SystemAPNsClock(), jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        logger: Logger, metricsFactory: (any MetricsFactory)? = nil
    ) throws(APNsError) {
        try configuration.validate()
        self.configuration = configuration
        do {
            self.sslContext = try NIOSSLContext(configuration: configuration.makeTLSConfiguration())
        } catch {
            throw .invalidConfiguration("the TLS configuration cannot be used (\(error))")
        }
        self.eventLoopGroup = eventLoopGroup
        self.clock = clock
        self.jitter = jitter
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        logger[metadataKey: "apns.team"] = "\(signingKey.teamID)"
        self.logger = logger
        self.metrics = APNsMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        let machine = StateMachine(
            configuration: .init(
                connections: configuration.connections, maxQueued: configuration.maxQueued,
                idlePingInterval: configuration.idlePingInterval, requestTimeout: configuration.requestTimeout),
            sign: { issuedAt throws(APNsError) in try signingKey.providerToken(issuedAt: issuedAt) })
        self.state = Mutex(State(machine: machine))

        // Deadlines and idle pings wake the machine through one timer armed
        // at its next deadline (see `rearm`), not a timer per request; the
        // gauges are recorded when they are read (``recordGauges()``).
        update { $0.machine.start() }
    }

    /// Sends one push and classifies the answer. Waits while the pool is
    /// full; a cancelled caller gets a retryable ``APNsError/cancelled``.
    public func send(_ request: APNsRequest) async -> APNsOutcome {
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                arrive(first: id, count: 1, request: { _ in request }, waiter: { _ in .single(continuation) })
                if Task.isCancelled { cancel(id..<(id + 1)) }
            }
        } onCancel: {
            cancel(id..<(id + 1))
        }
    }

    /// Sends one request and returns the server's answer with its
    /// classification: for requests whose answer carries data (channel
    /// management). Retries, deadlines and provider tokens are as in ``send(_:)``.
    public func exchange(_ request: APNsRequest) async -> APNsExchange {
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                arrive(first: id, count: 1, request: { _ in request }, waiter: { _ in .exchange(continuation) })
                if Task.isCancelled { cancel(id..<(id + 1)) }
            }
        } onCancel: {
            cancel(id..<(id + 1))
        }
    }

    /// Sends several pushes at once (a fan-out to many tokens) and returns
    /// their outcomes in the same order, when all are known. One suspension
    /// for the whole batch; pushes that do not fit wait as in ``send(_:)``.
    public func send(_ requests: [APNsRequest]) async -> [APNsOutcome] {
        guard !requests.isEmpty else { return [] }
        let first = nextRequestID.wrappingAdd(requests.count, ordering: .relaxed).oldValue
        let ids = first..<(first + requests.count)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let collector = BatchCollector(count: requests.count, continuation: continuation)
                arrive(
                    first: first, count: requests.count, request: { requests[$0] },
                    waiter: { .batch(collector, index: $0) })
                if Task.isCancelled { cancel(ids) }
            }
        } onCancel: {
            cancel(ids)
        }
    }

    /// Starts several pushes at once and returns without waiting: `onOutcome`
    /// is called once per push with its index in `requests`, on the event
    /// loop that finished it (or on the caller's thread when it fails at
    /// once). For owners that apply outcomes in batches, without a task per
    /// push. Pushes that do not fit wait as in ``send(_:)``.
    public func submit(_ requests: [APNsRequest], onOutcome: @escaping @Sendable (Int, APNsOutcome) -> Void) {
        guard !requests.isEmpty else { return }
        let first = nextRequestID.wrappingAdd(requests.count, ordering: .relaxed).oldValue
        arrive(
            first: first, count: requests.count, request: { requests[$0] }, waiter: { .callback(onOutcome, index: $0) })
    }

    /// Current counts.
    public var statistics: Statistics {
        state.withLock { state in
            var limits: [Int: Int] = [:]
            for id in state.machine.connectionIDs { limits[id] = state.machine.streamLimit(of: id) }
            return Statistics(
                inFlight: state.machine.inFlightCount, queued: state.machine.queuedCount,
                waiting: state.machine.waitingCount, connections: state.machine.connectionCounts, streamLimits: limits,
                tokenRenewals: state.machine.tokens.renewals)
        }
    }

    /// Fails queued requests, lets streams in flight finish, closes every
    /// connection, and returns when they are closed.
    public func shutdown() async {
        // The timer keeps enforcing deadlines until the last stream ends.
        update { $0.machine.shutdown() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = state.withLock { state in
                if state.machine.isFinished { return true }
                state.shutdownWaiters.append(continuation)
                return false
            }
            if finished { continuation.resume() }
        }
        state.withLock { state in
            state.isStopped = true
            state.timer.disarm()?.cancel()
        }
    }

    // MARK: Inputs and effects

    /// Registers `count` requests with ids from `first` and hands them to the machine.
    private func arrive(
        first: Int, count: Int, request: (Int) -> APNsRequest, waiter: (Int) -> Waiter
    ) {
        let now = clock.now().seconds
        let started = NIODeadline.now()
        update { state in
            for index in 0..<count {
                state.pending[first + index] = Pending(request: request(index), waiter: waiter(index), startedAt: started)
            }
            return count == 1
                ? state.machine.requestArrived(first, now: now)
                : state.machine.requestsArrived(first..<(first + count), now: now)
        }
    }

    private func cancel(_ ids: Range<Int>) {
        let now = clock.now().seconds
        update { state in
            var actions: [StateMachine.Action] = []
            for id in ids { actions += state.machine.requestCancelled(id, now: now) }
            return actions
        }
    }

    /// Feeds one input to the machine under the lock, turns its actions into
    /// effects there, and performs them after releasing it.
    private func update(_ input: (inout State) -> [StateMachine.Action]) {
        let effects = state.withLock { state in
            let actions = input(&state)
            var effects = resolve(actions, state: &state)
            effects.disarmed = rearm(&state)
            return effects
        }
        perform(effects)
    }

    /// Arms the timer at the machine's next deadline (see ``MachineTimer``
    /// for when); returns the timer to cancel, if any. The machine's time
    /// is the injected ``APNsClock``, the wall clock in service: provider
    /// tokens carry it.
    private func rearm(_ state: inout State) -> Scheduled<Void>? {
        guard !state.isStopped else { return nil }
        let next = state.machine.nextDeadline.map { UnixTime(seconds: $0) }
        return state.timer.arm(at: next, now: clock.now(), on: eventLoopGroup.any()) { [weak self] number in self?.timerFired(number) }
    }

    /// The armed timer is spent once it fired: the re-arm after the tick
    /// arms the next deadline. A replaced timer that ran anyway leaves the
    /// armed one alone.
    private func timerFired(_ number: UInt64) {
        let now = clock.now().seconds
        update { state in
            guard state.timer.fired(number) else { return [] }
            return state.machine.tick(now: now)
        }
    }

    private func resolve(_ actions: [StateMachine.Action], state: inout State) -> Effects {
        var effects = Effects()
        for action in actions {
            switch action {
            case .createConnection(let id):
                effects.connects.append(id)
            case .scheduleReconnect(let id, let delay):
                effects.reconnects.append((id, delay))
            case .execute(let request, let connectionID, let token):
                guard let connection = state.connections[connectionID] else {
                    // Not expected: a connection joins `connections` with
                    // `connectionEstablished` and leaves it with
                    // `connectionClosed`, under the same lock. Should it
                    // happen, the request ends at its deadline.
                    logger.error(
                        "APNs pool has no connection for a request the pool machine placed on it",
                        metadata: ["apns.connection": "\(connectionID)"])
                    continue
                }
                guard let pending = state.pending[request] else { continue }
                let execution = APNsConnection.Execution(requestID: request, request: pending.request, token: token)
                if let index = effects.executions.firstIndex(where: { $0.connection === connection }) {
                    effects.executions[index].executions.append(execution)
                } else {
                    effects.executions.append((connection, [execution]))
                }
            case .cancelStream(let request, let connectionID):
                if let connection = state.connections[connectionID] { effects.cancels.append((connection, request)) }
            case .complete(let request, let outcome):
                if let pending = state.pending.removeValue(forKey: request) {
                    effects.finished.append((pending, outcome, state.answers.removeValue(forKey: request), false))
                }
            case .fail(let request, let outcome):
                if let pending = state.pending.removeValue(forKey: request) {
                    state.answers[request] = nil
                    effects.finished.append((pending, outcome, nil, true))
                }
            case .ping(let connectionID):
                if let connection = state.connections[connectionID] { effects.pings.append(connection) }
            case .closeConnection(let connectionID):
                if let connection = state.connections[connectionID] { effects.closes.append(connection) }
            }
        }
        if state.machine.isFinished && !state.shutdownWaiters.isEmpty {
            effects.shutdownWaiters = state.shutdownWaiters
            state.shutdownWaiters.removeAll()
        }
        return effects
    }

    private func perform(_ effects: Effects) {
        effects.disarmed?.cancel()
        for (connection, executions) in effects.executions { connection.execute(executions) }
        for (connection, request) in effects.cancels { connection.cancel(requestID: request) }
        for connection in effects.pings {
            metrics.pinged()
            connection.ping()
        }
        for connection in effects.closes { connection.close() }
        for id in effects.connects { connect(id) }
        for (id, delay) in effects.reconnects {
            logger.info("reconnecting to APNs after a delay", metadata: ["apns.connection": "\(id)", "apns.delay_s": "\(delay)"])
            eventLoopGroup.any().scheduleTask(in: .milliseconds(Int64(delay * 1000))) { [weak self] in
                self?.update { $0.machine.reconnectDue(id) }
            }
        }
        for (pending, outcome, answer, withoutResponse) in effects.finished {
            if withoutResponse { metrics.failure(outcome.metricReason) }
            finish(pending, outcome, answer: answer)
        }
        for waiter in effects.shutdownWaiters { waiter.resume() }
    }

    private func connect(_ id: Int) {
        metrics.connectionAttempt()
        let attempt = state.withLock { state in
            state.nextAttempt += 1
            state.attempts[id] = state.nextAttempt
            return state.nextAttempt
        }
        let future = APNsConnection.connect(
            id: id, endpoint: configuration.endpoint, sslContext: sslContext,
            connectTimeout: configuration.connectTimeout, pingTimeout: configuration.pingTimeout,
            eventLoop: eventLoopGroup.next(), logger: logger
        ) { [weak self] event in
            self?.connectionEvent(event, connection: id, attempt: attempt)
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let connection):
                self.logger.debug("APNs connection established", metadata: ["apns.connection": "\(id)"])
                let now = self.clock.now().seconds
                self.update { state in
                    state.connections[id] = connection
                    return state.machine.connectionEstablished(id, now: now)
                }
            case .failure(let error):
                self.logger.warning(
                    "could not connect to APNs", metadata: ["apns.connection": "\(id)", "apns.error": "\(error)"])
                let jitter = self.jitter()
                self.update { $0.machine.connectionFailed(id, error: "\(error)", jitter: jitter) }
            }
        }
    }

    // MARK: Connection events

    /// Feeds an event of connection `id` to the machine, unless it comes
    /// from an earlier channel of that id (a report that arrives after the
    /// pool reconnected).
    private func update(connection id: Int, attempt: Int, _ input: (inout State) -> [StateMachine.Action]) {
        update { state in
            guard state.attempts[id] == attempt else { return [] }
            return input(&state)
        }
    }

    private func connectionEvent(_ event: APNsConnectionEvent, connection id: Int, attempt: Int) {
        let now = clock.now().seconds
        switch event {
        case .settings(let maxConcurrentStreams):
            logger.debug(
                "APNs stream limit", metadata: ["apns.connection": "\(id)", "apns.max_streams": "\(maxConcurrentStreams)"])
            update(connection: id, attempt: attempt) {
                $0.machine.settingsReceived(id, maxConcurrentStreams: maxConcurrentStreams, now: now)
            }
        case .responses(let responses):
            responsesReceived(responses, connection: id, attempt: attempt, now: now)
        case .streamsEnded(let ended):
            countResends(ended)
            update(connection: id, attempt: attempt) { state in
                var actions: [StateMachine.Action] = []
                for (request, end) in ended { actions += state.machine.streamEnded(request, on: id, end, now: now) }
                return actions
            }
        case .goaway(let errorCode, let debug):
            logger.info(
                "APNs sent GOAWAY, draining the connection",
                metadata: ["apns.connection": "\(id)", "apns.error_code": "\(errorCode)", "apns.debug": "\(debug)"])
            update(connection: id, attempt: attempt) { $0.machine.goawayReceived(id) }
        case .closed(let ended):
            countResends(ended)
            let jitter = self.jitter()
            update(connection: id, attempt: attempt) { state in
                state.connections[id] = nil
                return state.machine.connectionClosed(
                    id, streams: ended.map { ($0.requestID, $0.end) }, jitter: jitter, now: now)
            }
        }
    }

    private func countResends(_ ended: [(requestID: Int, end: StateMachine.StreamEnd)]) {
        for (_, end) in ended {
            switch end {
            case .notSent, .refused, .aboveGoawayLastStream: metrics.resent()
            case .reset, .incomplete, .connectionLost: break
            }
        }
    }

    /// Classifies the responses read together and hands them to the machine
    /// under one lock.
    private func responsesReceived(
        _ responses: [(requestID: Int, response: APNsResponse)], connection id: Int, attempt: Int, now: Double
    ) {
        var classified: [(request: Int, outcome: APNsOutcome)] = []
        classified.reserveCapacity(responses.count)
        update(connection: id, attempt: attempt) { state in
            for (request, response) in responses {
                // A server that echoes no apns-id gets the request's own.
                let pending = state.pending[request]
                let apnsID = pending?.request.apnsID ?? ""
                if case .exchange = pending?.waiter { state.answers[request] = response }
                let outcome = response.outcome(requestAPNsID: apnsID)
                // Counted before the actions below resume the request's caller.
                metrics.response(status: response.status, reason: outcome.metricReason)
                classified.append((request, outcome))
            }
            return state.machine.responsesReceived(classified, on: id, now: now)
        }
        for (_, outcome) in classified {
            if case .permanent(403, .expiredProviderToken) = outcome {
                logger.info(
                    "APNs answered ExpiredProviderToken; the pool renews the token and retries once",
                    metadata: ["apns.connection": "\(id)"])
            }
        }
    }

    /// Resumes the caller of a request already removed from `pending`.
    private func finish(_ pending: Pending, _ outcome: APNsOutcome, answer: APNsResponse? = nil) {
        let elapsed = NIODeadline.now() - pending.startedAt
        metrics.completed(outcome, nanoseconds: elapsed.nanoseconds)
        if case .misconfigured(let error) = outcome {
            logger.error(
                "APNs configuration error: no push can succeed until it is fixed",
                metadata: ["apns.error": "\(error)"])
        }
        switch pending.waiter {
        case .single(let continuation): continuation.resume(returning: outcome)
        case .exchange(let continuation):
            continuation.resume(
                returning: APNsExchange(
                    outcome: outcome, status: answer?.status, headers: answer?.allHeaders ?? [:], body: answer?.body ?? []))
        case .batch(let collector, let index): collector.record(outcome, at: index)
        case .callback(let body, let index): body(index, outcome)
        }
    }

    /// Records `apns_streams_in_flight`, `apns_requests_queued` and
    /// `apns_connections{state}` as they are now: called when metrics are
    /// scraped, so nothing refreshes them in between.
    public func recordGauges() {
        let (inFlight, queued, counts) = state.withLock {
            ($0.machine.inFlightCount, $0.machine.queuedCount + $0.machine.waitingCount, $0.machine.connectionCounts)
        }
        metrics.gauges(inFlight: inFlight, queued: queued, connections: counts)
    }
}

extension APNsOutcome {
    /// The reason label of the requests metric.
    var metricReason: String {
        switch self {
        case .delivered: ""
        case .tokenInvalid(let reason, _): reason.description
        case .permanent(_, let reason): reason.description
        case .retryable(let failure): failure.reason?.description ?? failure.error.code.description
        case .misconfigured(let error): error.code.description
        }
    }
}

/// Gathers the outcomes of one batch and resumes its caller when the last
/// one is in.
private final class BatchCollector: Sendable {
    private struct Progress {
        var outcomes: [APNsOutcome?]
        var remaining: Int
        var continuation: CheckedContinuation<[APNsOutcome], Never>?
    }

    private let progress: Mutex<Progress>

    init(count: Int, continuation: CheckedContinuation<[APNsOutcome], Never>) {
        progress = Mutex(Progress(outcomes: Array(repeating: nil, count: count), remaining: count, continuation: continuation))
    }

    func record(_ outcome: APNsOutcome, at index: Int) {
        let finished: (CheckedContinuation<[APNsOutcome], Never>, [APNsOutcome])? = progress.withLock { progress in
            guard progress.outcomes[index] == nil else { return nil }
            progress.outcomes[index] = outcome
            progress.remaining -= 1
            guard progress.remaining == 0, let continuation = progress.continuation else { return nil }
            progress.continuation = nil
            return (continuation, progress.outcomes.compactMap { $0 })
        }
        if let (continuation, outcomes) = finished { continuation.resume(returning: outcomes) }
    }
}
