import LiveDispatchCore
import NIOCore

extension APNsConnectionPool {
    /// Every decision of the pool, without I/O: which connection a request
    /// goes to, when it waits, when connections open, reconnect, drain,
    /// close and ping. Inputs are `mutating func`s returning actions; time
    /// and jitter are passed in.
    ///
    /// A connection carries at most `min(server's SETTINGS_MAX_CONCURRENT_STREAMS,
    /// 1 until one of its requests succeeded)` streams. Requests above the
    /// total capacity wait in a queue of at most `maxQueued`; callers beyond
    /// that are suspended in a waiting line and admitted in arrival order.
    public struct StateMachine: Sendable {
        public typealias ConnectionID = Int
        public typealias RequestID = Int

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
            /// An idle connection is pinged after this many seconds without traffic.
            public var idlePingInterval: Double

            public init(
                connections: Int, maxQueued: Int, maxResends: Int = 20, backoffBase: Double = 0.1,
                backoffCap: Double = 60, idlePingInterval: Double = 600
            ) {
                self.connections = max(1, connections)
                self.maxQueued = max(1, maxQueued)
                self.maxResends = maxResends
                self.backoffBase = backoffBase
                self.backoffCap = backoffCap
                self.idlePingInterval = idlePingInterval
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

        struct Connection: Sendable {
            var state: ConnectionState
            var serverMaxStreams: Int = 1
            var authenticated = false
            var streams: Set<RequestID> = []
            var consecutiveFailures = 0
            var lastActivity: Double = 0

            var limit: Int { authenticated ? serverMaxStreams : min(1, serverMaxStreams) }
            var freeStreams: Int { state == .ready ? max(0, limit - streams.count) : 0 }
        }

        /// What the owner must do.
        public enum Action: Sendable, Hashable {
            /// Open connection `id` (a new one or a reconnect).
            case createConnection(ConnectionID)
            /// Open connection `id` after `delay` seconds.
            case scheduleReconnect(ConnectionID, delay: Double)
            /// Start the request on the connection.
            case execute(RequestID, on: ConnectionID)
            /// Resume a caller that waited for room in the queue; it calls
            /// ``requestArrived(_:now:)`` again.
            case admit(RequestID)
            /// Reset the stream of a request that timed out, on its connection.
            case cancelStream(RequestID, on: ConnectionID)
            /// Finish the request with this failure.
            case fail(RequestID, APNsError)
            /// Send a PING on the connection.
            case ping(ConnectionID)
            /// Send GOAWAY and close the connection (drained, or shutting down).
            case closeConnection(ConnectionID)
        }

        /// What happens to a request that arrives.
        public enum Arrival: Sendable, Hashable {
            case execute(on: ConnectionID)
            case queued
            /// The queue is full: the caller waits for ``Action/admit(_:)``.
            case wait
            case fail(APNsError)
        }

        public let configuration: Configuration
        private(set) var connections: [ConnectionID: Connection] = [:]
        private var queue = CircularBuffer<RequestID>()
        private var waiting = CircularBuffer<RequestID>()
        /// Waiters admitted but not yet arrived again; their room is kept.
        private var admitted: Set<RequestID> = []
        private var resends: [RequestID: Int] = [:]
        private var nextConnectionID = 0
        private var isShutdown = false

        public init(configuration: Configuration) {
            self.configuration = configuration
        }

        // MARK: Observations

        /// Requests in the queue (at most `maxQueued`).
        public var queuedCount: Int { queue.count }
        /// Callers suspended because the queue was full.
        public var waitingCount: Int { waiting.count }
        /// Streams open on all connections.
        public var inFlightCount: Int { connections.values.reduce(0) { $0 + $1.streams.count } }
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
        public func streamCount(of id: ConnectionID) -> Int? { connections[id]?.streams.count }
        public func state(of id: ConnectionID) -> ConnectionState? { connections[id]?.state }
        public var connectionIDs: [ConnectionID] { connections.keys.sorted() }

        // MARK: Inputs

        /// Opens the configured number of connections.
        public mutating func start() -> [Action] {
            (0..<configuration.connections).map { _ in .createConnection(addConnection()) }
        }

        /// A caller wants to send a request. A caller that was admitted
        /// after waiting passes the same id again.
        public mutating func requestArrived(_ id: RequestID, now: Double) -> Arrival {
            if isShutdown {
                admitted.remove(id)
                return .fail(.shutdown)
            }
            let wasAdmitted = admitted.remove(id) != nil
            if queue.isEmpty, let connection = leastLoadedConnection() {
                startStream(id, on: connection, now: now)
                return .execute(on: connection)
            }
            if wasAdmitted || queue.count + admitted.count < configuration.maxQueued {
                queue.append(id)
                return .queued
            }
            waiting.append(id)
            return .wait
        }

        /// The connection finished its TLS and HTTP/2 setup.
        public mutating func connectionEstablished(_ id: ConnectionID, now: Double) -> [Action] {
            guard var connection = connections[id], connection.state == .connecting else { return [] }
            connection.state = .ready
            connection.consecutiveFailures = 0
            connection.authenticated = false
            connection.serverMaxStreams = 1
            connection.lastActivity = now
            connections[id] = connection
            return dispatch(now: now)
        }

        /// The server's SETTINGS arrived with its stream limit.
        public mutating func settingsReceived(_ id: ConnectionID, maxConcurrentStreams: Int, now: Double) -> [Action] {
            guard connections[id] != nil else { return [] }
            connections[id]?.serverMaxStreams = max(0, maxConcurrentStreams)
            return dispatch(now: now)
        }

        /// Connecting failed; `jitter` is uniform in 0..<1.
        public mutating func connectionFailed(_ id: ConnectionID, jitter: Double) -> [Action] {
            guard var connection = connections[id] else { return [] }
            connection.state = .backingOff
            connection.consecutiveFailures += 1
            connections[id] = connection
            if isShutdown {
                connections[id] = nil
                return []
            }
            return [.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter))]
        }

        /// A scheduled reconnect is due.
        public mutating func reconnectDue(_ id: ConnectionID) -> [Action] {
            guard !isShutdown, connections[id]?.state == .backingOff else { return [] }
            connections[id]?.state = .connecting
            return [.createConnection(id)]
        }

        /// A request's response arrived (any status). `succeeded` is true for
        /// a 200, which proves the provider token and lifts the one-stream
        /// limit. `replaceConnection` is true when the server asked for
        /// another connection (503 `Shutdown`, 403 `UnrelatedKeyIdInToken`):
        /// this one drains as after a GOAWAY and a replacement opens.
        public mutating func responseReceived(
            _ request: RequestID, on id: ConnectionID, succeeded: Bool, replaceConnection: Bool = false, now: Double
        ) -> [Action] {
            resends[request] = nil
            // Mutated in place: copying a connection would copy its stream set.
            connections[id]?.streams.remove(request)
            connections[id]?.lastActivity = now
            if succeeded { connections[id]?.authenticated = true }
            let replacement = replaceConnection ? goawayReceived(id) : closeIfDrained(id)
            return replacement + dispatch(now: now)
        }

        /// The request was not processed by the server (`REFUSED_STREAM`, above
        /// a GOAWAY's last stream id, or never written): it goes to the front
        /// of the queue, up to `maxResends` times.
        public mutating func requestUnprocessed(_ request: RequestID, on id: ConnectionID, now: Double) -> [Action] {
            connections[id]?.streams.remove(request)
            var actions = closeIfDrained(id)
            let count = resends[request, default: 0] + 1
            if isShutdown {
                resends[request] = nil
                actions.append(.fail(request, .shutdown))
            } else if count > configuration.maxResends {
                resends[request] = nil
                actions.append(.fail(request, .streamReset(errorCode: 7)))
            } else {
                resends[request] = count
                queue.prepend(request)
            }
            return actions + dispatch(now: now)
        }

        /// The request must be sent again at once and does not count as a
        /// re-send (a renewed provider token, or it never left the client):
        /// it goes to the front of the queue.
        public mutating func requestRequeued(_ request: RequestID, on id: ConnectionID, now: Double) -> [Action] {
            connections[id]?.streams.remove(request)
            if isShutdown { return closeIfDrained(id) + [.fail(request, .shutdown)] }
            queue.prepend(request)
            return closeIfDrained(id) + dispatch(now: now)
        }

        /// The request failed on its connection and will not be re-sent by the
        /// pool (a reset, a lost connection): the owner reports it.
        public mutating func requestFailed(_ request: RequestID, on id: ConnectionID, now: Double) -> [Action] {
            resends[request] = nil
            connections[id]?.streams.remove(request)
            return closeIfDrained(id) + dispatch(now: now)
        }

        /// The server sent GOAWAY: the connection takes no new streams and a
        /// replacement is opened. The owner reports the unprocessed streams
        /// through ``requestUnprocessed(_:on:now:)``.
        public mutating func goawayReceived(_ id: ConnectionID) -> [Action] {
            guard var connection = connections[id], connection.state != .draining else { return [] }
            let wasUsable = connection.state == .ready || connection.state == .connecting
            connection.state = .draining
            connections[id] = connection
            var actions: [Action] = []
            if wasUsable && !isShutdown { actions.append(.createConnection(addConnection())) }
            return actions + closeIfDrained(id)
        }

        /// The connection's channel closed; its remaining streams have been
        /// reported already. A draining connection goes away; any other is
        /// reopened after a backoff. `jitter` is uniform in 0..<1.
        public mutating func connectionClosed(_ id: ConnectionID, jitter: Double) -> [Action] {
            guard var connection = connections[id] else { return [] }
            for request in connection.streams { resends[request] = nil }
            connection.streams.removeAll()
            if connection.state == .draining || isShutdown {
                connections[id] = nil
                return []
            }
            // A connection that was working gets a quick first retry; one
            // that failed before becoming ready backs off further.
            if connection.state == .connecting { connection.consecutiveFailures += 1 }
            connection.state = .backingOff
            connection.authenticated = false
            connections[id] = connection
            return [.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter))]
        }

        /// The request's deadline passed.
        public mutating func requestTimedOut(_ request: RequestID, seconds: Double, now: Double) -> [Action] {
            requestAbandoned(request, error: .timeout(seconds: seconds), now: now)
        }

        /// The request ends without an answer (deadline, cancelled caller):
        /// it leaves the queue, or its stream is reset.
        public mutating func requestAbandoned(_ request: RequestID, error: APNsError, now: Double) -> [Action] {
            resends[request] = nil
            if let index = queue.firstIndex(of: request) {
                queue.remove(at: index)
                return [.fail(request, error)] + admitWaiters()
            }
            if let index = waiting.firstIndex(of: request) {
                waiting.remove(at: index)
                return [.fail(request, error)]
            }
            if admitted.remove(request) != nil {
                return [.fail(request, error)] + admitWaiters()
            }
            for (id, connection) in connections where connection.streams.contains(request) {
                connections[id]?.streams.remove(request)
                return [.cancelStream(request, on: id), .fail(request, error)] + closeIfDrained(id) + dispatch(now: now)
            }
            return []
        }

        /// A periodic tick: idle ready connections get a PING.
        public mutating func tick(now: Double) -> [Action] {
            var actions: [Action] = []
            for (id, connection) in connections
            where connection.state == .ready && connection.streams.isEmpty
                && now - connection.lastActivity >= configuration.idlePingInterval
            {
                connections[id]?.lastActivity = now
                actions.append(.ping(id))
            }
            return actions
        }

        /// Stops the pool: waiting and queued requests fail, every connection
        /// is closed; streams in flight finish or fail when their connection closes.
        public mutating func shutdown() -> [Action] {
            guard !isShutdown else { return [] }
            isShutdown = true
            var actions: [Action] = []
            while let request = queue.popFirst() { actions.append(.fail(request, .shutdown)) }
            while let request = waiting.popFirst() { actions.append(.fail(request, .shutdown)) }
            for id in connections.keys.sorted() {
                switch connections[id]?.state {
                case .ready, .connecting, .draining:
                    connections[id]?.state = .draining
                    actions += closeIfDrained(id)
                case .backingOff, nil:
                    connections[id] = nil
                }
            }
            return actions
        }

        /// Whether every connection is gone after ``shutdown()``.
        public var isFinished: Bool { isShutdown && connections.isEmpty }

        // MARK: Helpers

        private mutating func addConnection() -> ConnectionID {
            let id = nextConnectionID
            nextConnectionID += 1
            connections[id] = Connection(state: .connecting)
            return id
        }

        private func leastLoadedConnection() -> ConnectionID? {
            var best: (id: ConnectionID, free: Int, load: Int)?
            for (id, connection) in connections where connection.freeStreams > 0 {
                let candidate = (id: id, free: connection.freeStreams, load: connection.streams.count)
                if let current = best {
                    if candidate.load < current.load || (candidate.load == current.load && candidate.id < current.id) {
                        best = candidate
                    }
                } else {
                    best = candidate
                }
            }
            return best?.id
        }

        private mutating func startStream(_ request: RequestID, on id: ConnectionID, now: Double) {
            connections[id]?.streams.insert(request)
            connections[id]?.lastActivity = now
        }

        private mutating func dispatch(now: Double) -> [Action] {
            var actions: [Action] = []
            while !queue.isEmpty, let connection = leastLoadedConnection(), let request = queue.popFirst() {
                startStream(request, on: connection, now: now)
                actions.append(.execute(request, on: connection))
            }
            return actions + admitWaiters()
        }

        private mutating func admitWaiters() -> [Action] {
            var actions: [Action] = []
            while queue.count + admitted.count < configuration.maxQueued, let request = waiting.popFirst() {
                admitted.insert(request)
                actions.append(.admit(request))
            }
            return actions
        }

        private mutating func closeIfDrained(_ id: ConnectionID) -> [Action] {
            guard let connection = connections[id], connection.state == .draining, connection.streams.isEmpty else {
                return []
            }
            return [.closeConnection(id)]
        }

        /// Exponential backoff with jitter: base·2^(failures−1), capped, then
        /// scaled into [½, 1] of that by `jitter`.
        func backoff(failures: Int, jitter: Double) -> Double {
            let exponent = Double(max(0, min(failures - 1, 30)))
            let ceiling = min(configuration.backoffCap, configuration.backoffBase * pow2(exponent))
            return ceiling * (0.5 + 0.5 * min(max(jitter, 0), 1))
        }

        private func pow2(_ exponent: Double) -> Double {
            var value = 1.0
            var remaining = Int(exponent)
            while remaining > 0 {
                value *= 2
                remaining -= 1
            }
            return value
        }
    }
}
