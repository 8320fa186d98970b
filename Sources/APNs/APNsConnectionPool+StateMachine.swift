import LiveDispatchCore

extension APNsConnectionPool {
    /// Every decision of the pool, without I/O: which connection a request
    /// goes to, when it waits, when it has waited too long, whether it is
    /// sent again, which provider token it carries, and when connections
    /// open, reconnect, drain, close and ping. Inputs are `mutating func`s
    /// returning actions; time and jitter are passed in, the provider token
    /// is signed by the injected ``Signer``.
    ///
    /// It composes two sub-machines and decides what joins them: the
    /// ``Connections`` (each connection's life and stream limit, backoff,
    /// idle pings) and the ``RequestQueue`` (where each request is, the
    /// queue and the waiting line, deadlines, resends). It decides which
    /// queued request starts on which connection, what a response or a
    /// lost stream does to both, and the provider token a stream carries
    /// (``ProviderTokenState``).
    ///
    /// Each request has a deadline (`requestTimeout` after it arrived) kept
    /// in a ``DeadlineQueue``; ``tick(now:)`` ends the requests whose
    /// deadline passed, wherever they are, and pings idle connections. The
    /// owner keeps one timer armed at ``nextDeadline``.
    public struct StateMachine: Sendable {
        public typealias ConnectionID = Int
        public typealias RequestID = Int
        /// Signs a provider token issued at the given time.
        public typealias Signer = @Sendable (UnixTime) throws(APNsError) -> String

        public let configuration: Configuration
        private let sign: Signer
        private var connections: Connections
        private var requests: RequestQueue
        /// The provider token shared by every connection.
        public private(set) var tokens = ProviderTokenState()

        public init(configuration: Configuration, sign: @escaping Signer) {
            self.configuration = configuration
            self.sign = sign
            connections = Connections(configuration: configuration)
            requests = RequestQueue(configuration: configuration)
        }

        private var isShutdown: Bool { connections.isShutdown }

        // MARK: Observations

        /// Connections per state.
        public var connectionCounts: [ConnectionState: Int] { connections.counts }
        /// The stream limit the pool applies to a connection now.
        public func streamLimit(of id: ConnectionID) -> Int? { connections[id]?.limit }
        /// Streams open on a connection.
        public func streamCount(of id: ConnectionID) -> Int? { connections[id]?.streams }
        public func state(of id: ConnectionID) -> ConnectionState? { connections[id]?.state }
        public var connectionIDs: [ConnectionID] { connections.ids }
        /// Where a request is; nil once it ended.
        public func phase(of request: RequestID) -> RequestPhase? { requests.phase(of: request) }
        /// Requests not ended yet.
        public var requestCount: Int { requests.count }
        /// Requests in the queue (at most `maxQueued`, except those put back
        /// at its front).
        public var queuedCount: Int { requests.queuedCount }
        /// Callers waiting because the queue was full.
        public var waitingCount: Int { requests.waitingCount }
        /// Streams open on all connections.
        public var inFlightCount: Int { requests.inFlightCount }
        /// Entries in the deadline queue, ended requests' included until they are dropped.
        var deadlineEntries: Int { requests.deadlineEntries }

        // MARK: Inputs

        /// Opens the configured number of connections.
        public mutating func start() -> [Action] {
            (0..<configuration.connections).map { _ in .createConnection(connections.add()) }
        }

        /// A caller wants to send a request; its deadline counts from `now`.
        public mutating func requestArrived(_ id: RequestID, now: Double) -> [Action] {
            var actions: [Action] = []
            arrive(id, now: now, into: &actions)
            return actions
        }

        /// Several requests arrive at once (a fan-out), in order.
        public mutating func requestsArrived(_ ids: some Sequence<RequestID>, now: Double) -> [Action] {
            var actions: [Action] = []
            for id in ids { arrive(id, now: now, into: &actions) }
            return actions
        }

        /// The connection finished its TLS and HTTP/2 setup. A connection
        /// the pool no longer wants (shut down meanwhile) is closed.
        public mutating func connectionEstablished(_ id: ConnectionID, now: Double) -> [Action] {
            guard connections.established(id, now: now) else { return [.closeConnection(id)] }
            var actions: [Action] = []
            dispatch(now: now, into: &actions)
            return actions
        }

        /// The server's SETTINGS arrived with its stream limit.
        public mutating func settingsReceived(_ id: ConnectionID, maxConcurrentStreams: Int, now: Double) -> [Action] {
            guard connections.settingsReceived(id, maxConcurrentStreams: maxConcurrentStreams) else { return [] }
            var actions: [Action] = []
            dispatch(now: now, into: &actions)
            return actions
        }

        /// Connecting failed with `error`; `jitter` is uniform in 0..<1.
        public mutating func connectionFailed(_ id: ConnectionID, error: String, jitter: Double) -> [Action] {
            connections.failed(id, error: error, jitter: jitter)
        }

        /// A scheduled reconnect is due.
        public mutating func reconnectDue(_ id: ConnectionID) -> [Action] {
            connections.reconnectDue(id)
        }

        /// A request's response arrived, classified. A 200 proves the
        /// provider token and lifts the one-stream limit. 503 `Shutdown` and
        /// 403 `UnrelatedKeyIdInToken` drain the connection as a GOAWAY
        /// would. An `ExpiredProviderToken` renews the token (within the
        /// 20-minute rule) and sends the request again, once.
        public mutating func responseReceived(
            _ request: RequestID, on id: ConnectionID, outcome: APNsOutcome, now: Double
        ) -> [Action] {
            var actions: [Action] = []
            receive(request, on: id, outcome: outcome, now: now, into: &actions)
            dispatch(now: now, into: &actions)
            return actions
        }

        /// Responses read together from one connection.
        public mutating func responsesReceived(
            _ responses: [(request: RequestID, outcome: APNsOutcome)], on id: ConnectionID, now: Double
        ) -> [Action] {
            var actions: [Action] = []
            actions.reserveCapacity(responses.count)
            for response in responses {
                receive(response.request, on: id, outcome: response.outcome, now: now, into: &actions)
            }
            dispatch(now: now, into: &actions)
            return actions
        }

        /// A stream ended without a response. One the server did not process
        /// goes back to the front of the queue (a refused one at most
        /// `maxResends` times); one it may have processed fails, retryable.
        public mutating func streamEnded(
            _ request: RequestID, on id: ConnectionID, _ end: StreamEnd, now: Double
        ) -> [Action] {
            var actions: [Action] = []
            if leaveStream(request, on: id) {
                if let countsAsResend = end.isResend {
                    requeue(request, countsAsResend: countsAsResend, into: &actions)
                } else {
                    finish(request, .fail(request, end.failure), into: &actions)
                }
                connections.closeIfDrained(id, into: &actions)
            }
            dispatch(now: now, into: &actions)
            return actions
        }

        /// The server sent GOAWAY: the connection takes no new streams and a
        /// replacement is opened. Its streams above the last-stream-id end
        /// through ``streamEnded(_:on:_:now:)``.
        public mutating func goawayReceived(_ id: ConnectionID) -> [Action] {
            var actions: [Action] = []
            connections.drain(id, into: &actions)
            return actions
        }

        /// The connection's channel closed; `streams` says how each stream
        /// it had written ended. Those the server did not process, and
        /// requests the connection never wrote (not in `streams`), go back to
        /// the front of the queue, oldest first; those it may have processed
        /// fail, retryable. A draining connection goes away; any other is
        /// reopened after a backoff. `jitter` is uniform in 0..<1.
        public mutating func connectionClosed(
            _ id: ConnectionID, streams: [(request: RequestID, end: StreamEnd)] = [], jitter: Double, now: Double
        ) -> [Action] {
            guard connections[id] != nil else { return [] }
            // Its requests are sorted out first: no stream starts anywhere
            // before the dispatch at the end.
            var actions: [Action] = []
            var unprocessed: [(request: RequestID, countsAsResend: Bool)] = []
            for (request, end) in streams where leaveStream(request, on: id) {
                if let countsAsResend = end.isResend {
                    unprocessed.append((request, countsAsResend))
                } else {
                    finish(request, .fail(request, end.failure), into: &actions)
                }
            }
            for request in requests.inFlight(on: id) {
                _ = leaveStream(request, on: id)
                unprocessed.append((request, false))
            }
            for (request, countsAsResend) in unprocessed.sorted(by: { $0.request > $1.request }) {
                requeue(request, countsAsResend: countsAsResend, into: &actions)
            }
            connections.closed(id, jitter: jitter, into: &actions)
            dispatch(now: now, into: &actions)
            return actions
        }

        /// The caller gave up: the request leaves its line, or its stream is reset.
        public mutating func requestCancelled(_ request: RequestID, now: Double) -> [Action] {
            var actions: [Action] = []
            abandon(request, Self.retryable(.cancelled), now: now, into: &actions)
            return actions
        }

        /// When ``tick(now:)`` has something to do: the earliest request
        /// deadline or idle ping; nil when nothing is ever due. The owner
        /// keeps one timer armed at it.
        public var nextDeadline: Double? {
            mutating get {
                let next = requests.nextDeadline
                guard let ping = connections.nextPing else { return next }
                return min(next ?? ping, ping)
            }
        }

        /// Time passed: requests whose deadline is `now` or earlier fail
        /// with a timeout, and idle ready connections get a PING.
        public mutating func tick(now: Double) -> [Action] {
            var actions: [Action] = []
            var timeout: APNsOutcome?
            for request in requests.popDue(now: now) where requests.contains(request) {
                let outcome = timeout ?? timeoutOutcome()
                timeout = outcome
                abandon(request, outcome, now: now, into: &actions)
            }
            connections.pingIdle(now: now, into: &actions)
            return actions
        }

        /// Stops the pool: waiting and queued requests fail, every connection
        /// is closed; streams in flight finish, or fail when their connection
        /// closes or their deadline passes.
        public mutating func shutdown() -> [Action] {
            guard !isShutdown else { return [] }
            var actions: [Action] = []
            for request in requests.removeLined() {
                actions.append(.fail(request, Self.retryable(.shutdown)))
            }
            connections.shutdown(into: &actions)
            return actions
        }

        /// Whether every connection is gone after ``shutdown()``.
        public var isFinished: Bool { isShutdown && connections.isEmpty }

        /// The wait before reconnecting after `failures` failures in a row.
        func backoff(failures: Int, jitter: Double) -> Double {
            connections.backoff(failures: failures, jitter: jitter)
        }

        // MARK: Between requests and connections

        private mutating func arrive(_ id: RequestID, now: Double, into actions: inout [Action]) {
            guard !isShutdown else {
                actions.append(.fail(id, Self.retryable(.shutdown)))
                return
            }
            if requests.isLineEmpty, let connection = connections.leastLoaded() {
                requests.arrive(id, now: now, getsStream: true)
                startStream(id, on: connection, now: now, into: &actions)
            } else {
                requests.arrive(id, now: now, getsStream: false)
            }
        }

        /// Handles one response; the caller dispatches afterwards.
        private mutating func receive(
            _ request: RequestID, on id: ConnectionID, outcome: APNsOutcome, now: Double, into actions: inout [Action]
        ) {
            connections.responseReceived(on: id, delivered: outcome.isDelivered, now: now)
            if leaveStream(request, on: id) {
                if case .permanent(403, .expiredProviderToken) = outcome {
                    providerTokenExpired(request, now: now, into: &actions)
                } else {
                    finish(request, .complete(request, outcome), into: &actions)
                }
            }
            if outcome.asksForAnotherConnection {
                connections.drain(id, into: &actions)
            } else {
                connections.closeIfDrained(id, into: &actions)
            }
        }

        /// Sends the request again with a newer token, once; a token too
        /// young to have expired (a wrong clock) is a configuration error.
        private mutating func providerTokenExpired(_ request: RequestID, now: Double, into actions: inout [Action]) {
            let rejected = APNsOutcome.misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
            guard let used = requests.tokenToRenew(request) else {
                finish(request, .complete(request, rejected), into: &actions)
                return
            }
            switch tokens.expiredReported(token: used, now: UnixTime(seconds: now)) {
            case .retry:
                break
            case .sign(let issuedAt):
                do throws(APNsError) {
                    tokens.signed(try sign(issuedAt), issuedAt: issuedAt)
                } catch {
                    finish(request, .complete(request, .misconfigured(error)), into: &actions)
                    return
                }
            case .refuse:
                finish(request, .complete(request, rejected), into: &actions)
                return
            }
            requests.tokenRenewed(request)
            requeue(request, countsAsResend: false, into: &actions)
        }

        /// Takes an in-flight request off its connection; false when it is
        /// not in flight there (it ended meanwhile, or the report is stale).
        private mutating func leaveStream(_ request: RequestID, on id: ConnectionID) -> Bool {
            guard requests.leaveStream(request, on: id) else { return false }
            connections.streamClosed(on: id)
            return true
        }

        /// Puts a request that left its stream at the front of the queue,
        /// or fails it after shutdown or its last resend.
        private mutating func requeue(_ request: RequestID, countsAsResend: Bool, into actions: inout [Action]) {
            if isShutdown {
                if requests.contains(request) { finish(request, .fail(request, Self.retryable(.shutdown)), into: &actions) }
            } else if !requests.requeue(request, countsAsResend: countsAsResend) {
                finish(request, .fail(request, Self.retryable(.streamReset(errorCode: 7))), into: &actions)
            }
        }

        /// Ends a request wherever it is, with `outcome`.
        private mutating func abandon(
            _ request: RequestID, _ outcome: APNsOutcome, now: Double, into actions: inout [Action]
        ) {
            guard let phase = requests.phase(of: request) else { return }
            switch phase {
            case .waiting:
                requests.leaveLine(request)
                finish(request, .fail(request, outcome), into: &actions)
            case .queued:
                requests.leaveLine(request)
                finish(request, .fail(request, outcome), into: &actions)
                dispatch(now: now, into: &actions)
            case .inFlight(let id):
                _ = leaveStream(request, on: id)
                actions.append(.cancelStream(request, on: id))
                finish(request, .fail(request, outcome), into: &actions)
                connections.closeIfDrained(id, into: &actions)
                dispatch(now: now, into: &actions)
            }
            requests.compactLines()
        }

        /// Forgets a request and emits its last action.
        private mutating func finish(_ request: RequestID, _ action: Action, into actions: inout [Action]) {
            requests.remove(request)
            actions.append(action)
        }

        /// Opens the request's stream with the current provider token,
        /// signing a new one when it is due.
        private mutating func startStream(_ request: RequestID, on id: ConnectionID, now: Double, into actions: inout [Action]) {
            let token: String
            switch tokens.tokenForRequest(now: UnixTime(seconds: now)) {
            case .use(let current):
                token = current
            case .sign(let issuedAt):
                do throws(APNsError) {
                    token = try sign(issuedAt)
                } catch {
                    finish(request, .fail(request, .misconfigured(error)), into: &actions)
                    return
                }
                tokens.signed(token, issuedAt: issuedAt)
            }
            requests.streamStarted(request, on: id, token: token)
            connections.streamOpened(on: id, now: now)
            actions.append(.execute(request, on: id, token: token))
        }

        /// Starts queued requests while connections have room, then lets
        /// waiting callers into the queue.
        private mutating func dispatch(now: Double, into actions: inout [Action]) {
            while !requests.isLineEmpty, let connection = connections.leastLoaded(), let request = requests.nextInLine() {
                startStream(request, on: connection, now: now, into: &actions)
            }
            requests.admitWaiting()
        }

        /// A timeout names the last connection error while no connection is ready.
        private func timeoutOutcome() -> APNsOutcome {
            Self.retryable(
                .timeout(
                    seconds: configuration.requestTimeout,
                    connectionError: connections.anyReady ? nil : connections.lastError))
        }

        static func retryable(_ error: APNsError) -> APNsOutcome {
            .retryable(.init(status: nil, reason: nil, error: error, retryAfter: nil))
        }
    }
}

extension APNsOutcome {
    fileprivate var isDelivered: Bool {
        if case .delivered = self { true } else { false }
    }

    /// 503 `Shutdown` (the server is going away) and 403
    /// `UnrelatedKeyIdInToken` (the connection is bound to another key).
    fileprivate var asksForAnotherConnection: Bool {
        switch self {
        case .retryable(let failure): failure.status == 503 && failure.reason == .shutdown
        case .misconfigured(let error): error == .providerTokenRejected(reason: .unrelatedKeyIDInToken)
        case .delivered, .tokenInvalid, .permanent: false
        }
    }
}
