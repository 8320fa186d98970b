import LiveDispatchCore

extension APNsConnectionPool.StateMachine {
    /// The pool's connections and the life of each: which one takes the
    /// next stream, how many streams each may carry, when one is ready,
    /// reconnects and after what backoff, when a draining one gets a
    /// replacement and closes, and when an idle one is pinged. It knows a
    /// connection's streams only as a count; which request rides which
    /// stream is the ``RequestQueue``'s to know.
    ///
    /// A connection carries at most `min(server's SETTINGS_MAX_CONCURRENT_STREAMS,
    /// 1 until one of its requests succeeded)` streams.
    struct Connections: Sendable {
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

        private let reconnectBackoff: Backoff
        private let idlePingInterval: Double
        private var byID: [ConnectionID: Connection] = [:]
        private var nextID = 0
        /// Why the last connection attempt failed, until one succeeds.
        private(set) var lastError: String?
        /// Set by ``shutdown(into:)``: no connection opens or reopens after it.
        private(set) var isShutdown = false

        init(configuration: Configuration) {
            reconnectBackoff = configuration.reconnectBackoff
            idlePingInterval = configuration.idlePingInterval
        }

        // MARK: Observations

        subscript(id: ConnectionID) -> Connection? { byID[id] }
        var isEmpty: Bool { byID.isEmpty }
        var ids: [ConnectionID] { byID.keys.sorted() }

        /// Connections per state, every state present.
        var counts: [ConnectionState: Int] {
            var counts: [ConnectionState: Int] = [:]
            for state in ConnectionState.allCases { counts[state] = 0 }
            for connection in byID.values { counts[connection.state, default: 0] += 1 }
            return counts
        }

        var anyReady: Bool { byID.values.contains { $0.state == .ready } }

        /// The ready connection with the fewest streams and room for one
        /// more (the lowest id among equals); nil when none has room.
        func leastLoaded() -> ConnectionID? {
            var best: (id: ConnectionID, load: Int)?
            for (id, connection) in byID where connection.freeStreams > 0 {
                if let current = best, connection.streams > current.load || (connection.streams == current.load && id > current.id) {
                    continue
                }
                best = (id, connection.streams)
            }
            return best?.id
        }

        /// When the first idle ready connection is due a PING; nil when none is idle.
        var nextPing: Double? {
            var next: Double?
            for connection in byID.values where connection.state == .ready && connection.streams == 0 {
                let ping = connection.lastActivity + idlePingInterval
                next = min(next ?? ping, ping)
            }
            return next
        }

        /// The wait before reconnecting after `failures` failures in a row.
        func backoff(failures: Int, jitter: Double) -> Double {
            reconnectBackoff.delay(attempt: failures, draw: jitter)
        }

        // MARK: Inputs

        /// A new connection, connecting.
        mutating func add() -> ConnectionID {
            let id = nextID
            nextID += 1
            byID[id] = Connection(state: .connecting)
            return id
        }

        /// The connection finished its setup; false when the pool no longer
        /// wants it (it is not connecting: shut down meanwhile).
        mutating func established(_ id: ConnectionID, now: Double) -> Bool {
            guard var connection = byID[id], connection.state == .connecting else { return false }
            connection.state = .ready
            connection.consecutiveFailures = 0
            connection.authenticated = false
            connection.serverMaxStreams = 1
            connection.lastActivity = now
            byID[id] = connection
            lastError = nil
            return true
        }

        /// The server's stream limit; false for a connection that is gone.
        mutating func settingsReceived(_ id: ConnectionID, maxConcurrentStreams: Int) -> Bool {
            guard byID[id] != nil else { return false }
            byID[id]?.serverMaxStreams = max(0, maxConcurrentStreams)
            return true
        }

        /// Connecting failed: back off longer each time, or go away after shutdown.
        mutating func failed(_ id: ConnectionID, error: String, jitter: Double) -> [Action] {
            guard var connection = byID[id] else { return [] }
            lastError = error
            if isShutdown {
                byID[id] = nil
                return []
            }
            connection.state = .backingOff
            connection.consecutiveFailures += 1
            byID[id] = connection
            return [.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter))]
        }

        mutating func reconnectDue(_ id: ConnectionID) -> [Action] {
            guard !isShutdown, byID[id]?.state == .backingOff else { return [] }
            byID[id]?.state = .connecting
            return [.createConnection(id)]
        }

        mutating func streamOpened(on id: ConnectionID, now: Double) {
            byID[id]?.streams += 1
            byID[id]?.lastActivity = now
        }

        mutating func streamClosed(on id: ConnectionID) {
            byID[id]?.streams -= 1
        }

        /// A response arrived on the connection; a delivered push proves
        /// its provider token and lifts the one-stream limit.
        mutating func responseReceived(on id: ConnectionID, delivered: Bool, now: Double) {
            byID[id]?.lastActivity = now
            if delivered { byID[id]?.authenticated = true }
        }

        /// No new streams on the connection; a replacement opens if it was usable.
        mutating func drain(_ id: ConnectionID, into actions: inout [Action]) {
            guard var connection = byID[id], connection.state != .draining else { return }
            let wasUsable = connection.state == .ready || connection.state == .connecting
            connection.state = .draining
            byID[id] = connection
            if wasUsable && !isShutdown { actions.append(.createConnection(add())) }
            closeIfDrained(id, into: &actions)
        }

        /// A draining connection closes once its last stream ended.
        func closeIfDrained(_ id: ConnectionID, into actions: inout [Action]) {
            guard let connection = byID[id], connection.state == .draining, connection.streams == 0 else { return }
            actions.append(.closeConnection(id))
        }

        /// The connection's channel closed, its streams accounted for. A
        /// draining connection (any, after shutdown) goes away; any other
        /// is reopened after a backoff: a quick first retry for one that
        /// was working, a longer one for one that failed before it was ready.
        mutating func closed(_ id: ConnectionID, jitter: Double, into actions: inout [Action]) {
            guard var connection = byID[id] else { return }
            if connection.state == .draining || isShutdown {
                byID[id] = nil
                return
            }
            if connection.state == .connecting { connection.consecutiveFailures += 1 }
            connection.state = .backingOff
            connection.authenticated = false
            connection.streams = 0
            byID[id] = connection
            actions.append(.scheduleReconnect(id, delay: backoff(failures: connection.consecutiveFailures, jitter: jitter)))
        }

        /// Idle ready connections get a PING, and count as active from `now`.
        mutating func pingIdle(now: Double, into actions: inout [Action]) {
            for id in byID.keys.sorted() {
                guard let connection = byID[id], connection.state == .ready, connection.streams == 0,
                    now - connection.lastActivity >= idlePingInterval
                else { continue }
                byID[id]?.lastActivity = now
                actions.append(.ping(id))
            }
        }

        /// Every connection drains and closes once empty; one backing off goes at once.
        mutating func shutdown(into actions: inout [Action]) {
            isShutdown = true
            for id in byID.keys.sorted() {
                switch byID[id]?.state {
                case .ready, .connecting, .draining:
                    byID[id]?.state = .draining
                    closeIfDrained(id, into: &actions)
                case .backingOff, nil:
                    byID[id] = nil
                }
            }
        }
    }
}
