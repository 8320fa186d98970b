import Foundation
import LiveDispatchCore
import Logging
import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A source of the current time, injected so token renewal can be tested.
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

    /// Who waits for a request's outcome.
    private enum Waiter: Sendable {
        case single(CheckedContinuation<APNsOutcome, Never>)
        case batch(BatchCollector, index: Int)
        case callback(@Sendable (Int, APNsOutcome) -> Void, index: Int)
    }

    private struct Pending {
        var request: APNsRequest
        var waiter: Waiter
        var startedAt: NIODeadline
        var deadline: NIODeadline
        var tokenUsed: String?
        var tokenRetried = false
    }

    private struct State {
        var machine: StateMachine
        var tokens = ProviderTokenState()
        var pending: [Int: Pending] = [:]
        var connections: [Int: APNsConnection] = [:]
        var sweeps = 0
        /// Why the last connection attempt failed, while none is ready.
        var connectionError: String?
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        var periodicTask: RepeatedTask?
    }

    private let configuration: APNsClientConfiguration
    private let signingKey: APNsSigningKey
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
    ///   - clock: the time used for provider tokens and idle pings.
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
        self.signingKey = signingKey
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
                idlePingInterval: configuration.idlePingInterval))
        self.state = Mutex(State(machine: machine))

        let actions = state.withLock { $0.machine.start() }
        perform(actions)
        // One periodic task checks deadlines, pings idle connections and
        // updates the gauges, so no timer is armed per request.
        let sweep = max(0.02, min(configuration.requestTimeout / 10, 0.25))
        let pingEvery = max(1, min(configuration.idlePingInterval / 4, 30))
        let sweepsPerPing = max(1, Int(pingEvery / sweep))
        let task = eventLoopGroup.any().scheduleRepeatedTask(
            initialDelay: .milliseconds(Int64(sweep * 1000)), delay: .milliseconds(Int64(sweep * 1000))
        ) { [weak self] _ in
            guard let self else { return }
            self.expireDeadlines()
            self.updateGauges()
            let now = self.clock.now().seconds
            self.perform(
                self.state.withLock { state in
                    state.sweeps += 1
                    return state.sweeps % sweepsPerPing == 0 ? state.machine.tick(now: now) : []
                })
        }
        state.withLock { $0.periodicTask = task }
    }

    /// Sends one push and classifies the answer. Waits while the pool is
    /// full; a cancelled caller gets a retryable ``APNsError/cancelled``.
    public func send(_ request: APNsRequest) async -> APNsOutcome {
        let timeout = TimeAmount.milliseconds(Int64(configuration.requestTimeout * 1000))
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = clock.now().seconds
                let started = NIODeadline.now()
                let clockNow = clock.now()
                let (actions, preparations) = state.withLock { state in
                    state.pending[id] = Pending(
                        request: request, waiter: .single(continuation), startedAt: started, deadline: started + timeout)
                    return Self.prepareExecutions(
                        Self.arrive(id, state: &state, now: now), now: clockNow, state: &state, signingKey: signingKey)
                }
                start(preparations)
                perform(actions)
                if Task.isCancelled { abandon(id, error: .cancelled) }
            }
        } onCancel: {
            abandon(id, error: .cancelled)
        }
    }

    /// Sends several pushes at once (a fan-out to many tokens) and returns
    /// their outcomes in the same order, when all are known. One suspension
    /// for the whole batch; pushes that do not fit wait as in ``send(_:)``.
    public func send(_ requests: [APNsRequest]) async -> [APNsOutcome] {
        guard !requests.isEmpty else { return [] }
        let timeout = TimeAmount.milliseconds(Int64(configuration.requestTimeout * 1000))
        let first = nextRequestID.wrappingAdd(requests.count, ordering: .relaxed).oldValue
        let ids = first..<(first + requests.count)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let collector = BatchCollector(count: requests.count, continuation: continuation)
                let now = clock.now()
                let started = NIODeadline.now()
                let (actions, preparations) = state.withLock { state in
                    var arrivals: [StateMachine.Action] = []
                    for (index, request) in requests.enumerated() {
                        let id = first + index
                        state.pending[id] = Pending(
                            request: request, waiter: .batch(collector, index: index), startedAt: started,
                            deadline: started + timeout)
                        arrivals += Self.arrive(id, state: &state, now: now.seconds)
                    }
                    return Self.prepareExecutions(arrivals, now: now, state: &state, signingKey: signingKey)
                }
                start(preparations)
                perform(actions)
                if Task.isCancelled { for id in ids { abandon(id, error: .cancelled) } }
            }
        } onCancel: {
            for id in ids { abandon(id, error: .cancelled) }
        }
    }

    /// Starts several pushes at once and returns without waiting: `onOutcome`
    /// is called once per push with its index in `requests`, on the event
    /// loop that finished it (or on the caller's thread when it fails at
    /// once). For owners that apply outcomes in batches, without a task per
    /// push. Pushes that do not fit wait as in ``send(_:)``.
    public func submit(_ requests: [APNsRequest], onOutcome: @escaping @Sendable (Int, APNsOutcome) -> Void) {
        guard !requests.isEmpty else { return }
        let timeout = TimeAmount.milliseconds(Int64(configuration.requestTimeout * 1000))
        let first = nextRequestID.wrappingAdd(requests.count, ordering: .relaxed).oldValue
        let now = clock.now()
        let started = NIODeadline.now()
        let (actions, preparations) = state.withLock { state in
            var arrivals: [StateMachine.Action] = []
            for (index, request) in requests.enumerated() {
                let id = first + index
                state.pending[id] = Pending(
                    request: request, waiter: .callback(onOutcome, index: index), startedAt: started, deadline: started + timeout)
                arrivals += Self.arrive(id, state: &state, now: now.seconds)
            }
            return Self.prepareExecutions(arrivals, now: now, state: &state, signingKey: signingKey)
        }
        start(preparations)
        perform(actions)
    }

    /// Current counts.
    public var statistics: Statistics {
        state.withLock { state in
            var limits: [Int: Int] = [:]
            for id in state.machine.connectionIDs { limits[id] = state.machine.streamLimit(of: id) }
            return Statistics(
                inFlight: state.machine.inFlightCount, queued: state.machine.queuedCount,
                waiting: state.machine.waitingCount, connections: state.machine.connectionCounts, streamLimits: limits,
                tokenRenewals: state.tokens.renewals)
        }
    }

    /// Fails queued requests, lets streams in flight finish, closes every
    /// connection, and returns when they are closed.
    public func shutdown() async {
        // The periodic task keeps enforcing deadlines until the last stream ends.
        let actions = state.withLock { $0.machine.shutdown() }
        perform(actions)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = state.withLock { state in
                if state.machine.isFinished { return true }
                state.shutdownWaiters.append(continuation)
                return false
            }
            if finished { continuation.resume() }
        }
        state.withLock { state in
            state.periodicTask?.cancel()
            state.periodicTask = nil
        }
    }

    // MARK: Arrival and actions

    private static func arrive(_ id: Int, state: inout State, now: Double) -> [StateMachine.Action] {
        switch state.machine.requestArrived(id, now: now) {
        case .execute(let connection): [.execute(id, on: connection)]
        case .queued, .wait: []
        case .fail(let error): [.fail(id, error)]
        }
    }

    private func perform(_ actions: [StateMachine.Action]) {
        guard !actions.isEmpty else { return }
        var actions = actions
        if actions.contains(where: { if case .execute = $0 { true } else { false } }) {
            let now = clock.now()
            let preparations: [Preparation]
            (actions, preparations) = state.withLock { state in
                Self.prepareExecutions(actions, now: now, state: &state, signingKey: signingKey)
            }
            start(preparations)
        }
        for action in actions {
            switch action {
            case .createConnection(let id):
                connect(id)
            case .scheduleReconnect(let id, let delay):
                logger.info("reconnecting to APNs after a delay", metadata: ["apns.connection": "\(id)", "apns.delay_s": "\(delay)"])
                eventLoopGroup.any().scheduleTask(in: .milliseconds(Int64(delay * 1000))) { [weak self] in
                    guard let self else { return }
                    self.perform(self.state.withLock { $0.machine.reconnectDue(id) })
                }
            case .execute(let request, let connectionID):
                // Prepared above; never left in the list.
                start(state.withLock { [Self.prepare(request, on: connectionID, now: clock.now(), state: &$0, signingKey: signingKey)] })
            case .admit(let request):
                let now = clock.now().seconds
                perform(state.withLock { Self.arrive(request, state: &$0, now: now) })
            case .cancelStream(let request, let connectionID):
                state.withLock { $0.connections[connectionID] }?.cancel(requestID: request)
            case .fail(let request, let error):
                complete(
                    request,
                    .retryable(.init(status: nil, reason: nil, error: error, retryAfter: nil)))
            case .ping(let connectionID):
                metrics.pinged()
                state.withLock { $0.connections[connectionID] }?.ping()
            case .closeConnection(let connectionID):
                state.withLock { $0.connections[connectionID] }?.close()
            }
        }
    }

    private func connect(_ id: Int) {
        metrics.connectionAttempt()
        let future = APNsConnection.connect(
            id: id, endpoint: configuration.endpoint, sslContext: sslContext,
            connectTimeout: configuration.connectTimeout, pingTimeout: configuration.pingTimeout,
            eventLoop: eventLoopGroup.next(), logger: logger
        ) { [weak self] event in
            self?.connectionEvent(event, connection: id)
        }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let connection):
                let now = self.clock.now().seconds
                let (actions, usable) = self.state.withLock { state in
                    state.connections[id] = connection
                    state.connectionError = nil
                    guard state.machine.state(of: id) == .connecting else { return ([StateMachine.Action](), false) }
                    return (state.machine.connectionEstablished(id, now: now), true)
                }
                if usable {
                    self.logger.debug("APNs connection ready", metadata: ["apns.connection": "\(id)"])
                } else {
                    connection.close()
                }
                self.perform(actions)
            case .failure(let error):
                self.logger.warning(
                    "could not connect to APNs", metadata: ["apns.connection": "\(id)", "apns.error": "\(error)"])
                let jitter = self.jitter()
                let actions = self.state.withLock { state in
                    state.connectionError = "\(error)"
                    var actions = state.machine.connectionFailed(id, jitter: jitter)
                    actions += self.resumeShutdownIfFinished(&state)
                    return actions
                }
                self.perform(actions)
            }
        }
    }

    /// A stream ready to start, or why it cannot.
    private enum Preparation {
        case ready(APNsConnection, request: Int, APNsRequest, token: String)
        case signingFailed(request: Int, connection: Int, APNsError)
        /// The request completed meanwhile (deadline) or the connection is gone.
        case gone(request: Int, connection: Int, alive: Bool)
    }

    /// Prepares every `.execute` action under the lock (token, headers) and
    /// returns the other actions.
    private static func prepareExecutions(
        _ actions: [StateMachine.Action], now: UnixTime, state: inout State, signingKey: APNsSigningKey
    ) -> ([StateMachine.Action], [Preparation]) {
        var others: [StateMachine.Action] = []
        var preparations: [Preparation] = []
        for action in actions {
            if case .execute(let request, let connection) = action {
                preparations.append(prepare(request, on: connection, now: now, state: &state, signingKey: signingKey))
            } else {
                others.append(action)
            }
        }
        return (others, preparations)
    }

    private static func prepare(
        _ request: Int, on connectionID: Int, now: UnixTime, state: inout State, signingKey: APNsSigningKey
    ) -> Preparation {
        guard let connection = state.connections[connectionID], state.pending[request] != nil else {
            return .gone(request: request, connection: connectionID, alive: state.pending[request] != nil)
        }
        let token: String
        switch state.tokens.tokenForRequest(now: now) {
        case .use(let current):
            token = current
        case .sign(let issuedAt):
            do throws(APNsError) {
                token = try signingKey.providerToken(issuedAt: issuedAt)
            } catch {
                return .signingFailed(request: request, connection: connectionID, error)
            }
            state.tokens.signed(token, issuedAt: issuedAt)
        }
        state.pending[request]?.tokenUsed = token
        guard let pending = state.pending[request] else {
            return .gone(request: request, connection: connectionID, alive: false)
        }
        return .ready(connection, request: request, pending.request, token: token)
    }

    /// Starts prepared streams; handles the ones that cannot start.
    private func start(_ preparations: [Preparation]) {
        for preparation in preparations {
            switch preparation {
            case .ready(let connection, let request, let apnsRequest, let token):
                // Headers are built outside the lock.
                var headers = apnsRequest.headers
                headers.append(("authorization", "bearer " + token))
                connection.execute(requestID: request, headers: headers, body: apnsRequest.payload)
            case .signingFailed(let request, let connectionID, let error):
                logger.error("cannot sign the APNs provider token", metadata: ["apns.error": "\(error)"])
                let now = clock.now().seconds
                perform(state.withLock { $0.machine.requestFailed(request, on: connectionID, now: now) })
                complete(request, .misconfigured(error))
            case .gone(let request, let connectionID, let alive):
                let now = clock.now().seconds
                perform(
                    state.withLock {
                        alive
                            ? $0.machine.requestRequeued(request, on: connectionID, now: now)
                            : $0.machine.requestFailed(request, on: connectionID, now: now)
                    })
            }
        }
    }

    // MARK: Connection events

    private func connectionEvent(_ event: APNsConnectionEvent, connection id: Int) {
        let now = clock.now()
        switch event {
        case .settings(let maxConcurrentStreams):
            logger.debug(
                "APNs stream limit", metadata: ["apns.connection": "\(id)", "apns.max_streams": "\(maxConcurrentStreams)"])
            perform(state.withLock { $0.machine.settingsReceived(id, maxConcurrentStreams: maxConcurrentStreams, now: now.seconds) })
        case .responses(let responses):
            responsesReceived(responses, connection: id, now: now)
        case .unprocessed(let request, let wasSent):
            metrics.resent()
            perform(
                state.withLock { state in
                    if state.pending[request] == nil {
                        return state.machine.requestFailed(request, on: id, now: now.seconds)
                    }
                    return wasSent
                        ? state.machine.requestUnprocessed(request, on: id, now: now.seconds)
                        : state.machine.requestRequeued(request, on: id, now: now.seconds)
                })
        case .failed(let request, let error):
            perform(state.withLock { $0.machine.requestFailed(request, on: id, now: now.seconds) })
            complete(request, .retryable(.init(status: nil, reason: nil, error: error, retryAfter: nil)))
        case .goaway(let errorCode, let debug):
            logger.info(
                "APNs sent GOAWAY, draining the connection",
                metadata: ["apns.connection": "\(id)", "apns.error_code": "\(errorCode)", "apns.debug": "\(debug)"])
            perform(state.withLock { $0.machine.goawayReceived(id) })
        case .closed:
            let jitter = self.jitter()
            perform(
                state.withLock { state in
                    state.connections[id] = nil
                    return state.machine.connectionClosed(id, jitter: jitter) + resumeShutdownIfFinished(&state)
                })
        }
    }

    private enum AfterResponse {
        case complete(APNsOutcome, Pending, status: Int)
        case renewedAndRequeued(status: Int)
    }

    private func responsesReceived(
        _ responses: [(requestID: Int, response: APNsResponse)], connection id: Int, now: UnixTime
    ) {
        var actions: [StateMachine.Action] = []
        let results: [AfterResponse] = state.withLock { state in
            var results: [AfterResponse] = []
            results.reserveCapacity(responses.count)
            for (request, response) in responses {
                let (result, produced) = Self.responseReceived(
                    response, request: request, connection: id, now: now, state: &state, signingKey: signingKey)
                actions += produced
                if let result { results.append(result) }
            }
            return results
        }
        perform(actions)
        for result in results {
            switch result {
            case .complete(let outcome, let pending, let status):
                metrics.response(status: status, reason: outcome.metricReason)
                finish(pending, outcome)
            case .renewedAndRequeued(let status):
                logger.info("APNs provider token expired, renewed it and retrying", metadata: ["apns.connection": "\(id)"])
                metrics.response(status: status, reason: APNsReason.expiredProviderToken.description)
            }
        }
    }

    /// Classifies one response under the lock; an `ExpiredProviderToken`
    /// renews the token (within the 20-minute rule) and re-queues the request once.
    private static func responseReceived(
        _ response: APNsResponse, request: Int, connection id: Int, now: UnixTime, state: inout State,
        signingKey: APNsSigningKey
    ) -> (AfterResponse?, [StateMachine.Action]) {
        let succeeded = response.status == 200
        let replace = !succeeded && response.asksForAnotherConnection
        guard var pending = state.pending[request] else {
            return (
                nil,
                state.machine.responseReceived(
                    request, on: id, succeeded: succeeded, replaceConnection: replace, now: now.seconds)
            )
        }
        var outcome = response.outcome(requestAPNsID: pending.request.apnsID)
        if case .permanent(403, .expiredProviderToken) = outcome {
            if !pending.tokenRetried, let used = pending.tokenUsed {
                switch state.tokens.expiredReported(token: used, now: now) {
                case .retry:
                    pending.tokenRetried = true
                    state.pending[request] = pending
                    return (
                        .renewedAndRequeued(status: response.status),
                        state.machine.requestRequeued(request, on: id, now: now.seconds)
                    )
                case .sign(let issuedAt):
                    do throws(APNsError) {
                        let token = try signingKey.providerToken(issuedAt: issuedAt)
                        state.tokens.signed(token, issuedAt: issuedAt)
                        pending.tokenRetried = true
                        state.pending[request] = pending
                        return (
                            .renewedAndRequeued(status: response.status),
                            state.machine.requestRequeued(request, on: id, now: now.seconds)
                        )
                    } catch {
                        outcome = .misconfigured(error)
                    }
                case .refuse:
                    outcome = .misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
                }
            } else {
                outcome = .misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
            }
        }
        state.pending[request] = nil
        return (
            .complete(outcome, pending, status: response.status),
            state.machine.responseReceived(
                request, on: id, succeeded: succeeded, replaceConnection: replace, now: now.seconds)
        )
    }

    /// Fails every request whose deadline has passed.
    private func expireDeadlines() {
        let now = NIODeadline.now()
        let (expired, connectionError) = state.withLock { state in
            let noneReady = (state.machine.connectionCounts[.ready] ?? 0) == 0
            return (state.pending.filter { $0.value.deadline <= now }.map(\.key), noneReady ? state.connectionError : nil)
        }
        for request in expired {
            abandon(request, error: .timeout(seconds: configuration.requestTimeout, connectionError: connectionError))
        }
    }

    private func abandon(_ request: Int, error: APNsError) {
        let now = clock.now().seconds
        perform(state.withLock { $0.machine.requestAbandoned(request, error: error, now: now) })
    }

    /// Finishes a request exactly once; later calls for it do nothing.
    private func complete(_ request: Int, _ outcome: APNsOutcome) {
        guard let pending = state.withLock({ $0.pending.removeValue(forKey: request) }) else { return }
        metrics.failure(outcome.metricReason)
        finish(pending, outcome)
    }

    /// Resumes the caller of a request already removed from `pending`.
    private func finish(_ pending: Pending, _ outcome: APNsOutcome) {
        let elapsed = NIODeadline.now() - pending.startedAt
        metrics.completed(outcome: outcome.label, nanoseconds: elapsed.nanoseconds)
        if case .misconfigured(let error) = outcome {
            logger.error(
                "APNs configuration error: no push can succeed until it is fixed",
                metadata: ["apns.error": "\(error)"])
        }
        switch pending.waiter {
        case .single(let continuation): continuation.resume(returning: outcome)
        case .batch(let collector, let index): collector.record(outcome, at: index)
        case .callback(let body, let index): body(index, outcome)
        }
    }

    private func resumeShutdownIfFinished(_ state: inout State) -> [StateMachine.Action] {
        guard state.machine.isFinished, !state.shutdownWaiters.isEmpty else { return [] }
        let waiters = state.shutdownWaiters
        state.shutdownWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
        return []
    }

    private func updateGauges() {
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
