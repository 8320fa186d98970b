import LiveDispatchCore

/// What the pool's state machine and its sub-machines speak of: their
/// configuration, where a connection or a request is, how a stream ended,
/// and the actions the owner performs.
extension APNsConnectionPool.StateMachine {
    /// How many connections and queued requests the pool keeps, and how
    /// long it waits: reconnect backoff, idle pings, request deadlines.
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
}

extension APNsConnectionPool.StateMachine.StreamEnd {
    /// Whether a stream that ended this way goes back to the queue (nil:
    /// it fails), and whether that counts against `maxResends`.
    var isResend: Bool? {
        switch self {
        case .notSent: false
        case .refused, .aboveGoawayLastStream: true
        case .reset, .incomplete, .connectionLost: nil
        }
    }

    /// The failure of a stream the server may have processed.
    var failure: APNsOutcome {
        typealias Machine = APNsConnectionPool.StateMachine
        return switch self {
        case .reset(let errorCode): Machine.retryable(.streamReset(errorCode: errorCode))
        case .incomplete: Machine.retryable(.protocolError("stream ended without a :status"))
        case .connectionLost, .notSent, .refused, .aboveGoawayLastStream:
            Machine.retryable(.connectionClosed("connection lost with the stream open"))
        }
    }
}
