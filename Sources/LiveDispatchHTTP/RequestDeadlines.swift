/// The header and request timeouts of one HTTP/1 connection, as a value-type
/// state machine: a client must finish a request's head within
/// `headerTimeout` of the connection's start (or of the previous response),
/// and its body within `requestTimeout` of the head. Slow clients that
/// trickle a byte at a time, which an idle timeout never catches, are closed.
///
/// Each input returns what the owner does with its one timer.
struct RequestDeadlines: Sendable {
    enum Phase: Sendable, Hashable {
        /// Waiting for the next request's head.
        case awaitingHead(deadline: ContinuousClock.Instant)
        /// Head received; waiting for the end of its body.
        case readingBody(deadline: ContinuousClock.Instant)
        /// The request was read; the server is answering (no deadline of ours).
        case responding
        case closed
    }

    enum Action: Sendable, Hashable {
        /// Arm (or move) the timer to fire at this instant.
        case arm(ContinuousClock.Instant)
        case cancelTimer
        /// The client was too slow: close the connection.
        case close
        case none
    }

    private(set) var headerTimeout: Duration
    private(set) var requestTimeout: Duration
    private(set) var phase: Phase

    /// The timeouts for waits that start from now on (the listener's
    /// pressure shortens them, ``ConnectionAdmission/timeouts``); a wait
    /// already under way keeps its deadline.
    mutating func use(headerTimeout: Duration, requestTimeout: Duration) {
        self.headerTimeout = headerTimeout
        self.requestTimeout = requestTimeout
    }

    init(headerTimeout: Duration, requestTimeout: Duration, openedAt now: ContinuousClock.Instant) {
        self.headerTimeout = headerTimeout
        self.requestTimeout = requestTimeout
        self.phase = .awaitingHead(deadline: now + headerTimeout)
    }

    /// The timer to arm when the connection opens.
    var initialAction: Action {
        switch phase {
        case .awaitingHead(let deadline), .readingBody(let deadline): .arm(deadline)
        case .responding: .cancelTimer
        case .closed: .none
        }
    }

    mutating func headReceived(at now: ContinuousClock.Instant) -> Action {
        switch phase {
        case .awaitingHead, .readingBody, .responding:
            let deadline = now + requestTimeout
            phase = .readingBody(deadline: deadline)
            return .arm(deadline)
        case .closed:
            return .none
        }
    }

    mutating func requestEnded() -> Action {
        switch phase {
        case .readingBody, .awaitingHead:
            phase = .responding
            return .cancelTimer
        case .responding, .closed:
            return .none
        }
    }

    /// The response's last part was written; a kept-alive connection waits
    /// for the next head. A response that said `Connection: close`
    /// (`keepAlive` false) closes the connection once written, whatever of
    /// the request's body is still unread.
    mutating func responseEnded(at now: ContinuousClock.Instant, keepAlive: Bool = true) -> Action {
        if !keepAlive {
            switch phase {
            case .awaitingHead, .readingBody, .responding:
                phase = .closed
                return .close
            case .closed:
                return .none
            }
        }
        switch phase {
        case .responding:
            let deadline = now + headerTimeout
            phase = .awaitingHead(deadline: deadline)
            return .arm(deadline)
        case .awaitingHead, .readingBody, .closed:
            // A pipelined request is already being read: its deadline stands.
            return .none
        }
    }

    mutating func timerFired(at now: ContinuousClock.Instant) -> Action {
        switch phase {
        case .awaitingHead(let deadline), .readingBody(let deadline):
            guard now >= deadline else { return .arm(deadline) }
            phase = .closed
            return .close
        case .responding, .closed:
            return .none
        }
    }

    mutating func connectionClosed() -> Action {
        switch phase {
        case .awaitingHead, .readingBody, .responding:
            phase = .closed
            return .cancelTimer
        case .closed:
            return .none
        }
    }
}
