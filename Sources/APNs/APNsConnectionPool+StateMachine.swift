import LiveDispatchCore
import NIOCore

extension APNsConnectionPool {
    /// Every decision of the pool, without I/O: which connection a request
    /// goes to, when it waits, when it has waited too long, whether it is
    /// sent again, which provider token it carries, and when connections
    /// open, reconnect, drain, close and ping. Inputs are `mutating func`s
    /// returning actions; time and jitter are passed in, the provider token
    /// is signed by the injected ``Signer``.
    ///
    /// A connection carries at most `min(server's SETTINGS_MAX_CONCURRENT_STREAMS,
    /// 1 until one of its requests succeeded)` streams. Requests above the
    /// total capacity wait in a queue of at most `maxQueued`; callers beyond
    /// that wait in a line and move into the queue in arrival order.
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

        public struct Configuration: Sendable, Hashable {
            /// Connections kept open.
            public var connections: Int
            /// Requests held in the queue above capacity.
            public var maxQueued: Int
            /// How often a request is re-sent after `REFUSED_STREAM` or a GOAWAY
            /// that left it unprocessed, before it is reported as retryable.
            public var maxResends: Int
            /// First reconnect delay in seconds; doubles per failure up to ``backoffCap``.
            public var backoffBase: Double
            public var backoffCap: Double
            /// The wait before a reconnect: between half and all of
            /// `min(backoffCap, backoffBase·2^(failures−1))`.
            public var reconnectBackoff: Backoff { Backoff(base: backoffBase, cap: backoffCap, jitter: .half) }
            /// An idle connection is pinged after this many seconds without traffic.
            public var idlePingInterval: Double
            /// Longest time a request may take from its arrival, queueing included.
            public var requestTimeout: Double

            public init(
                connections: Int, maxQueued: Int, maxResends: Int = 20, backoffBase: Double = 0.1,
                backoffCap: Double = 60, idlePingInterval: Double = 600, requestTimeout: Double = 30
            ) {
                self.connections = max(1, connections)
                self.maxQueued = max(1, maxQueued)
                self.maxResends = maxResends
                self.backoffBase = backoffBase
                self.backoffCap = backoffCap
                self.idlePingInterval = idlePingInterval
                self.requestTimeout = requestTimeout
            }
        }

        /// Where a connection is in its life.
        public enum ConnectionState: String, Sendable, Hashable, CaseIterable {
            /// TCP + TLS + HTTP/2 being set up.
            case connecting
            /// Usable.
            case ready
            /// Received GOAWAY or is being closed: no new streams; closes when empty.
            case draining
            /// Failed or lost; waiting before the next attempt.
            case backingOff
        }

        /// Where a request is.
        public enum RequestPhase: Sendable, Hashable {
            /// In the line of callers beyond the queue (back-pressure).
            case waiting
            /// In the queue, next to get a stream.
            case queued
            /// Its stream is open on this connection.
            case inFlight(ConnectionID)
        }

        /// How a stream ended without a response, as its connection saw it.
        public enum StreamEnd: Sendable, Hashable {
            /// Never written: the connection could not take it.
            case notSent
            /// The server reset it with `REFUSED_STREAM`: not processed.
            case refused
            /// Its stream id is above the last-stream-id of the server's
            /// GOAWAY: not processed.
            case aboveGoawayLastStream
            /// Reset with another error code: possibly processed.
            case reset(errorCode: UInt32)
            /// Ended without a `:status`: possibly processed.
            case incomplete
            /// The connection was lost with the stream open: possibly processed.
            case connectionLost
        }

        /// What the owner must do.
        public enum Action: Sendable, Hashable {
            /// Open connection `id` (a new one or a reconnect).
            case createConnection(ConnectionID)
            /// Open connection `id` after `delay` seconds.
            case scheduleReconnect(ConnectionID, delay: Double)
            /// Start the request on the connection with this provider token.
            case execute(RequestID, on: ConnectionID, token: String)
            /// Reset the stream of a request that ended without its answer.
            case cancelStream(RequestID, on: ConnectionID)
            /// Hand the caller the outcome of the response it got.
            case complete(RequestID, APNsOutcome)
            /// End the request without a response (deadline, shutdown, lost
            /// stream, a token that cannot be signed).
            case fail(RequestID, APNsOutcome)
            /// Send a PING on the connection.
            case ping(ConnectionID)
            /// Send GOAWAY and close the connection (drained, or shutting down).
            case closeConnection(ConnectionID)
        }

        struct Connection: Sendable {
            var state: ConnectionState
            var serverMaxStreams: Int = 1
            var authenticated = false
            var streams = 0
            var consecutiveFailures = 0
            var lastActivity: Double = 0

            var limit: Int { authenticated ? serverMaxStreams : min(1, serverMaxStreams) }
            var freeStreams: Int { state == .ready ? max(0, limit - streams) : 0 }
        }

        struct Request: Sendable {
            var phase: RequestPhase
            let deadline: Double
            /// The provider token of its last stream.
            var token: String?
            /// Whether it was sent again after `ExpiredProviderToken` (once at most).
            var tokenRetried = false
            var resends = 0
        }

        public let configuration: Configuration
        private let sign: Signer
        private(set) var connections: [ConnectionID: Connection] = [:]
        private var requests: [RequestID: Request] = [:]
        /// Ids of queued and waiting requests, oldest first. Ids of requests
        /// that left early stay until popped or compacted.
        private var queue = CircularBuffer<RequestID>()
        private var waiting = CircularBuffer<RequestID>()
        private var deadlines = DeadlineQueue<RequestID>.ordered
        /// Requests in the queue (at most `maxQueued`, except those put back
        /// at its front).
        public private(set) var queuedCount = 0
        /// Callers waiting because the queue was full.
        public private(set) var waitingCount = 0
        /// Streams open on all connections.
        public private(set) var inFlightCount = 0
        /// The provider token shared by every connection.
        public private(set) var tokens = ProviderTokenState()
        /// Why the last connection attempt failed, until one succeeds.
        private var lastConnectionError: String?
        private var nextConnectionID = 0
        private var isShutdown = false

        public init(configuration: Configuration, sign: @escaping Signer) {
            self.configuration = configuration
            self.sign = sign
        }

        // MARK: Observations

        /// Connections per state.
        public var connectionCounts: [ConnectionState: Int] {
            var counts: [ConnectionState: Int] = [:]
            for state in ConnectionState.allCases { counts[state] = 0 }
            for connection in connections.values { counts[connection.state, default: 0] += 1 }
            return counts
        }
        /// The stream limit the pool applies to a connection now.
        public func streamLimit(of id: ConnectionID) -> Int? { connections[id]?.limit }
        /// Streams open on a connection.
        public func streamCount(of id: ConnectionID) -> Int? { connections[id]?.streams }
        public func state(of id: ConnectionID) -> ConnectionState? { connections[id]?.state }
        public var connectionIDs: [ConnectionID] { connections.keys.sorted() }
        /// Where a request is; nil once it ended.
        public func phase(of request: RequestID) -> RequestPhase? { requests[request]?.phase }
        /// Requests not ended yet.
        public var requestCount: Int { requests.count }
        /// Entries in the deadline queue, ended requests' included until they are dropped.
        var deadlineEntries: Int { deadlines.storedEntries }

        // MARK: Inputs

        /// Opens the configured number of connections.
        public mutating func start() -> [Action] {
            (0..<configuration.connections).map { _ in .createConnection(addConnection()) }
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
            guard var connection = connections[id], connection.state == .connecting else {
                return [.closeConnection(id)]
            }
            connection.state = .ready
            connection.consecutiveFailures = 0
            connection.authenticated = false
            connection.serverMaxStreams = 1
            connection.lastActivity = now
            connections[id] = connection
            lastConnectionError = nil
            var actions: [Action] = []
            dispatch(now: now, into: &actions)
            return actions
        }

        /// The server's SETTINGS arrived with its stream limit.
        public mutating func settingsReceived(_ id: ConnectionID, maxConcurrentStreams: Int, now: Double) -> [Action] {
            guard connections[id] != nil else { return [] }
            connections[id]?.serverMaxStreams = max(0, maxConcurrentStreams)
            var actions: [Action] = []
            dispatch(now: now, into: &actions)
            return actions
        }

        /// Connecting failed with `error`; `jitter` is uniform in 0..<1.
        public mutating func connectionFailed(_ id: ConnectionID, error: String, jitter: Double) -> [Action] {
            guard var connection = connections[id] else { return [] }
            lastConnectionError = error
            if isShutdown {
                connections[id] = nil
                return []
            }
            connection.state = .backingOff
            connection.consecutiveFailures += 1
            connections[id] = connection
            return [.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter))]
        }

        /// A scheduled reconnect is due.
        public mutating func reconnectDue(_ id: ConnectionID) -> [Action] {
            guard !isShutdown, connections[id]?.state == .backingOff else { return [] }
            connections[id]?.state = .connecting
            return [.createConnection(id)]
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
                if let countsAsResend = Self.isResend(end) {
                    requeue(request, countsAsResend: countsAsResend, into: &actions)
                } else {
                    finish(request, .fail(request, Self.failure(end)), into: &actions)
                }
                closeIfDrained(id, into: &actions)
            }
            dispatch(now: now, into: &actions)
            return actions
        }

        /// The server sent GOAWAY: the connection takes no new streams and a
        /// replacement is opened. Its streams above the last-stream-id end
        /// through ``streamEnded(_:on:_:now:)``.
        public mutating func goawayReceived(_ id: ConnectionID) -> [Action] {
            var actions: [Action] = []
            drain(id, into: &actions)
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
            guard var connection = connections[id] else { return [] }
            var actions: [Action] = []
            // No stream may start on it while its requests are sorted out.
            connections[id]?.state = .backingOff
            var unprocessed: [(request: RequestID, countsAsResend: Bool)] = []
            for (request, end) in streams where leaveStream(request, on: id) {
                if let countsAsResend = Self.isResend(end) {
                    unprocessed.append((request, countsAsResend))
                } else {
                    finish(request, .fail(request, Self.failure(end)), into: &actions)
                }
            }
            let stranded = requests.compactMap { $0.value.phase == .inFlight(id) ? $0.key : nil }
            for request in stranded {
                _ = leaveStream(request, on: id)
                unprocessed.append((request, false))
            }
            for (request, countsAsResend) in unprocessed.sorted(by: { $0.request > $1.request }) {
                requeue(request, countsAsResend: countsAsResend, into: &actions)
            }
            connection.streams = 0
            if connection.state == .draining || isShutdown {
                connections[id] = nil
            } else {
                // A connection that was working gets a quick first retry; one
                // that failed before becoming ready backs off further.
                if connection.state == .connecting { connection.consecutiveFailures += 1 }
                connection.state = .backingOff
                connection.authenticated = false
                connections[id] = connection
                actions.append(.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter)))
            }
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
                var next = deadlines.next?.seconds
                for connection in connections.values where connection.state == .ready && connection.streams == 0 {
                    let ping = connection.lastActivity + configuration.idlePingInterval
                    next = min(next ?? ping, ping)
                }
                return next
            }
        }

        /// Time passed: requests whose deadline is `now` or earlier fail
        /// with a timeout, and idle ready connections get a PING.
        public mutating func tick(now: Double) -> [Action] {
            var actions: [Action] = []
            var timeout: APNsOutcome?
            for request in deadlines.popDue(now: UnixTime(seconds: now)) where requests[request] != nil {
                let outcome = timeout ?? timeoutOutcome()
                timeout = outcome
                abandon(request, outcome, now: now, into: &actions)
            }
            for id in connections.keys.sorted() {
                guard let connection = connections[id], connection.state == .ready, connection.streams == 0,
                    now - connection.lastActivity >= configuration.idlePingInterval
                else { continue }
                connections[id]?.lastActivity = now
                actions.append(.ping(id))
            }
            return actions
        }

        /// Stops the pool: waiting and queued requests fail, every connection
        /// is closed; streams in flight finish, or fail when their connection
        /// closes or their deadline passes.
        public mutating func shutdown() -> [Action] {
            guard !isShutdown else { return [] }
            isShutdown = true
            var actions: [Action] = []
            for line in [queue, waiting] {
                for request in line where requests[request]?.phase == .queued || requests[request]?.phase == .waiting {
                    finish(request, .fail(request, Self.retryable(.shutdown)), into: &actions)
                }
            }
            queue.removeAll()
            waiting.removeAll()
            queuedCount = 0
            waitingCount = 0
            for id in connections.keys.sorted() {
                switch connections[id]?.state {
                case .ready, .connecting, .draining:
                    connections[id]?.state = .draining
                    closeIfDrained(id, into: &actions)
                case .backingOff, nil:
                    connections[id] = nil
                }
            }
            return actions
        }

        /// Whether every connection is gone after ``shutdown()``.
        public var isFinished: Bool { isShutdown && connections.isEmpty }

        // MARK: Requests

        private mutating func arrive(_ id: RequestID, now: Double, into actions: inout [Action]) {
            guard !isShutdown else {
                actions.append(.fail(id, Self.retryable(.shutdown)))
                return
            }
            let deadline = now + configuration.requestTimeout
            deadlines.schedule(id, at: UnixTime(seconds: deadline))
            if queuedCount == 0, waitingCount == 0, let connection = leastLoadedConnection() {
                requests[id] = Request(phase: .queued, deadline: deadline)
                startStream(id, on: connection, now: now, into: &actions)
            } else if waitingCount == 0 && queuedCount < configuration.maxQueued {
                requests[id] = Request(phase: .queued, deadline: deadline)
                queue.append(id)
                queuedCount += 1
            } else {
                requests[id] = Request(phase: .waiting, deadline: deadline)
                waiting.append(id)
                waitingCount += 1
            }
        }

        /// Handles one response; the caller dispatches afterwards.
        private mutating func receive(
            _ request: RequestID, on id: ConnectionID, outcome: APNsOutcome, now: Double, into actions: inout [Action]
        ) {
            connections[id]?.lastActivity = now
            if case .delivered = outcome { connections[id]?.authenticated = true }
            if leaveStream(request, on: id) {
                if case .permanent(403, .expiredProviderToken) = outcome {
                    providerTokenExpired(request, now: now, into: &actions)
                } else {
                    finish(request, .complete(request, outcome), into: &actions)
                }
            }
            if Self.asksForAnotherConnection(outcome) {
                drain(id, into: &actions)
            } else {
                closeIfDrained(id, into: &actions)
            }
        }

        /// Sends the request again with a newer token, once; a token too
        /// young to have expired (a wrong clock) is a configuration error.
        private mutating func providerTokenExpired(_ request: RequestID, now: Double, into actions: inout [Action]) {
            let rejected = APNsOutcome.misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
            guard let state = requests[request], !state.tokenRetried, let used = state.token else {
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
            requests[request]?.tokenRetried = true
            requeue(request, countsAsResend: false, into: &actions)
        }

        /// Takes an in-flight request off its connection; false when it is
        /// not in flight there (it ended meanwhile, or the report is stale).
        private mutating func leaveStream(_ request: RequestID, on id: ConnectionID) -> Bool {
            guard requests[request]?.phase == .inFlight(id) else { return false }
            connections[id]?.streams -= 1
            inFlightCount -= 1
            requests[request]?.phase = .queued
            return true
        }

        /// Puts a request that left its stream at the front of the queue.
        private mutating func requeue(_ request: RequestID, countsAsResend: Bool, into actions: inout [Action]) {
            guard var state = requests[request] else { return }
            if isShutdown {
                finish(request, .fail(request, Self.retryable(.shutdown)), into: &actions)
                return
            }
            if countsAsResend {
                state.resends += 1
                guard state.resends <= configuration.maxResends else {
                    finish(request, .fail(request, Self.retryable(.streamReset(errorCode: 7))), into: &actions)
                    return
                }
            }
            state.phase = .queued
            requests[request] = state
            queue.prepend(request)
            queuedCount += 1
        }

        /// Ends a request wherever it is, with `outcome`.
        private mutating func abandon(
            _ request: RequestID, _ outcome: APNsOutcome, now: Double, into actions: inout [Action]
        ) {
            guard let state = requests[request] else { return }
            switch state.phase {
            case .waiting:
                waitingCount -= 1
                finish(request, .fail(request, outcome), into: &actions)
            case .queued:
                queuedCount -= 1
                finish(request, .fail(request, outcome), into: &actions)
                dispatch(now: now, into: &actions)
            case .inFlight(let id):
                _ = leaveStream(request, on: id)
                actions.append(.cancelStream(request, on: id))
                finish(request, .fail(request, outcome), into: &actions)
                closeIfDrained(id, into: &actions)
                dispatch(now: now, into: &actions)
            }
            compactLines()
        }

        /// Forgets a request and emits its last action.
        private mutating func finish(_ request: RequestID, _ action: Action, into actions: inout [Action]) {
            requests[request] = nil
            actions.append(action)
            deadlines.cancel(request)
        }

        private mutating func compactLines() {
            if queue.count > 2 * queuedCount + 64 {
                queue = CircularBuffer(queue.filter { requests[$0]?.phase == .queued })
            }
            if waiting.count > 2 * waitingCount + 64 {
                waiting = CircularBuffer(waiting.filter { requests[$0]?.phase == .waiting })
            }
        }

        // MARK: Streams and connections

        private mutating func addConnection() -> ConnectionID {
            let id = nextConnectionID
            nextConnectionID += 1
            connections[id] = Connection(state: .connecting)
            return id
        }

        private func leastLoadedConnection() -> ConnectionID? {
            var best: (id: ConnectionID, load: Int)?
            for (id, connection) in connections where connection.freeStreams > 0 {
                if let current = best, connection.streams > current.load || (connection.streams == current.load && id > current.id) {
                    continue
                }
                best = (id, connection.streams)
            }
            return best?.id
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
            requests[request]?.phase = .inFlight(id)
            requests[request]?.token = token
            connections[id]?.streams += 1
            connections[id]?.lastActivity = now
            inFlightCount += 1
            actions.append(.execute(request, on: id, token: token))
        }

        /// The oldest request in the queue, else the oldest waiting one.
        private mutating func nextInLine() -> RequestID? {
            while let request = queue.popFirst() {
                if requests[request]?.phase == .queued {
                    queuedCount -= 1
                    return request
                }
            }
            while let request = waiting.popFirst() {
                if requests[request]?.phase == .waiting {
                    waitingCount -= 1
                    return request
                }
            }
            return nil
        }

        /// Starts queued requests while connections have room, then lets
        /// waiting callers into the queue.
        private mutating func dispatch(now: Double, into actions: inout [Action]) {
            while queuedCount + waitingCount > 0, let connection = leastLoadedConnection(), let request = nextInLine() {
                startStream(request, on: connection, now: now, into: &actions)
            }
            while queuedCount < configuration.maxQueued, waitingCount > 0, let request = waiting.popFirst() {
                guard requests[request]?.phase == .waiting else { continue }
                requests[request]?.phase = .queued
                queue.append(request)
                queuedCount += 1
                waitingCount -= 1
            }
        }

        /// No new streams on the connection; a replacement opens if it was usable.
        private mutating func drain(_ id: ConnectionID, into actions: inout [Action]) {
            guard var connection = connections[id], connection.state != .draining else { return }
            let wasUsable = connection.state == .ready || connection.state == .connecting
            connection.state = .draining
            connections[id] = connection
            if wasUsable && !isShutdown { actions.append(.createConnection(addConnection())) }
            closeIfDrained(id, into: &actions)
        }

        private func closeIfDrained(_ id: ConnectionID, into actions: inout [Action]) {
            guard let connection = connections[id], connection.state == .draining, connection.streams == 0 else { return }
            actions.append(.closeConnection(id))
        }

        /// Whether a stream that ended this way goes back to the queue (nil:
        /// it fails), and whether that counts against `maxResends`.
        private static func isResend(_ end: StreamEnd) -> Bool? {
            switch end {
            case .notSent: false
            case .refused, .aboveGoawayLastStream: true
            case .reset, .incomplete, .connectionLost: nil
            }
        }

        /// The failure of a stream the server may have processed.
        private static func failure(_ end: StreamEnd) -> APNsOutcome {
            switch end {
            case .reset(let errorCode): retryable(.streamReset(errorCode: errorCode))
            case .incomplete: retryable(.protocolError("stream ended without a :status"))
            case .connectionLost, .notSent, .refused, .aboveGoawayLastStream:
                retryable(.connectionClosed("connection lost with the stream open"))
            }
        }

        /// A timeout names the last connection error while no connection is ready.
        private func timeoutOutcome() -> APNsOutcome {
            let noneReady = !connections.values.contains { $0.state == .ready }
            return Self.retryable(
                .timeout(seconds: configuration.requestTimeout, connectionError: noneReady ? lastConnectionError : nil))
        }

        private static func retryable(_ error: APNsError) -> APNsOutcome {
            .retryable(.init(status: nil, reason: nil, error: error, retryAfter: nil))
        }

        /// 503 `Shutdown` (the server is going away) and 403
        /// `UnrelatedKeyIdInToken` (the connection is bound to another key).
        private static func asksForAnotherConnection(_ outcome: APNsOutcome) -> Bool {
            switch outcome {
            case .retryable(let failure): failure.status == 503 && failure.reason == .shutdown
            case .misconfigured(let error): error == .providerTokenRejected(reason: .unrelatedKeyIDInToken)
            case .delivered, .tokenInvalid, .permanent: false
            }
        }

        /// The wait before reconnecting after `failures` failures in a row.
        func backoff(failures: Int, jitter: Double) -> Double {
            configuration.reconnectBackoff.delay(attempt: failures, draw: jitter)
        }
    }
}
