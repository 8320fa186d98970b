import LiveDispatchCore
import NIOCore

extension APNsConnectionPool.StateMachine {
    /// Every request the pool has not ended yet, and where it is: which one
    /// gets the next free stream, which waits in the queue (at most
    /// `maxQueued`) or in the line of callers beyond it, whose deadline has
    /// passed, and whether one that came back unprocessed may be sent again.
    /// It knows a connection only by its id; which connection has room is
    /// the ``Connections``' to decide.
    ///
    /// Requests get streams oldest first: the queue, then the waiting line,
    /// whose callers move into the queue in arrival order as it empties. A
    /// request sent again goes to the front of the queue.
    struct RequestQueue: Sendable {
        struct Request: Sendable {
            var phase: RequestPhase
            /// The provider token of its last stream.
            var token: String?
            /// Whether it was sent again after `ExpiredProviderToken` (once at most).
            var tokenRetried = false
            var resends = 0
        }

        private let maxQueued: Int
        private let maxResends: Int
        private let requestTimeout: Double
        private var requests: [RequestID: Request] = [:]
        /// Ids of queued and waiting requests, oldest first. Ids of requests
        /// that left early stay until popped or compacted.
        private var queue = CircularBuffer<RequestID>()
        private var waiting = CircularBuffer<RequestID>()
        private var deadlines = DeadlineQueue<RequestID>.ordered
        /// Requests in the queue (at most `maxQueued`, except those put back
        /// at its front).
        private(set) var queuedCount = 0
        /// Callers waiting because the queue was full.
        private(set) var waitingCount = 0
        /// Requests whose stream is open.
        private(set) var inFlightCount = 0

        init(configuration: Configuration) {
            maxQueued = configuration.maxQueued
            maxResends = configuration.maxResends
            requestTimeout = configuration.requestTimeout
        }

        // MARK: Observations

        /// Requests not ended yet.
        var count: Int { requests.count }
        func contains(_ request: RequestID) -> Bool { requests[request] != nil }
        /// Where a request is; nil once it ended.
        func phase(of request: RequestID) -> RequestPhase? { requests[request]?.phase }
        /// No request waits for a stream.
        var isLineEmpty: Bool { queuedCount == 0 && waitingCount == 0 }
        /// Entries in the deadline queue, ended requests' included until they are dropped.
        var deadlineEntries: Int { deadlines.storedEntries }
        /// The earliest deadline of a request not ended yet.
        var nextDeadline: Double? { mutating get { deadlines.next?.seconds } }

        /// Requests whose stream is open on the connection.
        func inFlight(on id: ConnectionID) -> [RequestID] {
            requests.compactMap { $0.value.phase == .inFlight(id) ? $0.key : nil }
        }

        /// The provider token of the request's last stream, unless it was
        /// already sent again with a newer one.
        func tokenToRenew(_ request: RequestID) -> String? {
            guard let state = requests[request], !state.tokenRetried else { return nil }
            return state.token
        }

        // MARK: Inputs

        /// Registers a request arriving at `now`, with its deadline
        /// `requestTimeout` later. One that `getsStream` is about to be
        /// started (``streamStarted(_:on:token:)``); any other joins the
        /// queue, or the waiting line when the queue is full or callers
        /// already wait.
        mutating func arrive(_ id: RequestID, now: Double, getsStream: Bool) {
            deadlines.schedule(id, at: UnixTime(seconds: now + requestTimeout))
            if getsStream {
                requests[id] = Request(phase: .queued)
            } else if waitingCount == 0 && queuedCount < maxQueued {
                requests[id] = Request(phase: .queued)
                queue.append(id)
                queuedCount += 1
            } else {
                requests[id] = Request(phase: .waiting)
                waiting.append(id)
                waitingCount += 1
            }
        }

        mutating func streamStarted(_ request: RequestID, on id: ConnectionID, token: String) {
            requests[request]?.phase = .inFlight(id)
            requests[request]?.token = token
            inFlightCount += 1
        }

        /// Takes an in-flight request off its stream; false when it is not
        /// in flight on that connection (it ended meanwhile, or the report
        /// is stale).
        mutating func leaveStream(_ request: RequestID, on id: ConnectionID) -> Bool {
            guard requests[request]?.phase == .inFlight(id) else { return false }
            inFlightCount -= 1
            requests[request]?.phase = .queued
            return true
        }

        /// Puts a request that left its stream at the front of the queue.
        /// False when `countsAsResend` and it was sent again `maxResends`
        /// times already: it stays where it is, for the caller to end.
        mutating func requeue(_ request: RequestID, countsAsResend: Bool) -> Bool {
            guard var state = requests[request] else { return true }
            if countsAsResend {
                state.resends += 1
                guard state.resends <= maxResends else { return false }
            }
            state.phase = .queued
            requests[request] = state
            queue.prepend(request)
            queuedCount += 1
            return true
        }

        /// The request is sent again with a newer provider token; it will not be again.
        mutating func tokenRenewed(_ request: RequestID) {
            requests[request]?.tokenRetried = true
        }

        /// A queued or waiting request leaves its line early; its id stays
        /// in the line until popped or compacted.
        mutating func leaveLine(_ request: RequestID) {
            switch requests[request]?.phase {
            case .waiting: waitingCount -= 1
            case .queued: queuedCount -= 1
            case .inFlight, nil: break
            }
        }

        /// Forgets a request that ended, and its deadline.
        mutating func remove(_ request: RequestID) {
            requests[request] = nil
            deadlines.cancel(request)
        }

        /// Takes the oldest request in the queue, else the oldest waiting one.
        mutating func nextInLine() -> RequestID? {
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

        /// Moves waiting callers into the queue while it has room.
        mutating func admitWaiting() {
            while queuedCount < maxQueued, waitingCount > 0, let request = waiting.popFirst() {
                guard requests[request]?.phase == .waiting else { continue }
                requests[request]?.phase = .queued
                queue.append(request)
                queuedCount += 1
                waitingCount -= 1
            }
        }

        /// Takes the requests whose deadline is `now` or earlier, earliest first.
        mutating func popDue(now: Double) -> [RequestID] {
            deadlines.popDue(now: UnixTime(seconds: now))
        }

        /// Forgets every queued and waiting request, queue first, and
        /// returns them in that order.
        mutating func removeLined() -> [RequestID] {
            var removed: [RequestID] = []
            for line in [queue, waiting] {
                for request in line where requests[request]?.phase == .queued || requests[request]?.phase == .waiting {
                    remove(request)
                    removed.append(request)
                }
            }
            queue.removeAll()
            waiting.removeAll()
            queuedCount = 0
            waitingCount = 0
            return removed
        }

        /// Drops the ids of requests that left the lines early once they
        /// outnumber those still in line.
        mutating func compactLines() {
            if queue.count > 2 * queuedCount + 64 {
                queue = CircularBuffer(queue.filter { requests[$0]?.phase == .queued })
            }
            if waiting.count > 2 * waitingCount + 64 {
                waiting = CircularBuffer(waiting.filter { requests[$0]?.phase == .waiting })
            }
        }
    }
}
