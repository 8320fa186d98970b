/// What becomes of each outcome queued for the webhook: a bounded queue, a
/// limit on requests in flight, retries with ``Backoff`` (or the receiver's
/// `Retry-After`), and the bounds on a message's age and attempts.
///
/// A pure machine: every input is a `mutating func` that returns the
/// actions to perform; time and the random draw of the backoff are passed
/// in. The owner keeps one timer armed at ``nextDeadline`` and calls
/// ``timerFired(now:)`` when it fires.
///
/// A message counts against the capacity from ``enqueue(id:body:now:)``
/// until it is delivered or dropped, whether it waits for a free request,
/// is in flight, or waits out a backoff. A message whose age passes
/// `maxAge` while it waits for a free request is dropped when its turn
/// comes; one whose next retry would come after that age is dropped at once.
public struct WebhookQueue: Sendable {
    /// The queue's bounds.
    public struct Configuration: Sendable, Hashable {
        /// Messages held at most (waiting, in flight or backing off); a new
        /// message beyond it is dropped as ``DropReason/queueFull``.
        public var capacity: Int
        /// Requests in flight at most.
        public var concurrency: Int
        /// Attempts per message at most, the first included.
        public var maxAttempts: Int
        /// Seconds after its enqueueing past which a message is not sent.
        public var maxAge: Double
        /// The wait before each retry when the receiver names none.
        public var backoff: Backoff
        /// The longest `Retry-After` honoured, in seconds; longer ones are cut to it.
        public var maxRetryAfter: Double

        public init(
            capacity: Int = 10_000, concurrency: Int = 4, maxAttempts: Int = 8, maxAge: Double = 3_600,
            backoff: Backoff = Backoff(base: 1, cap: 300, jitter: .full), maxRetryAfter: Double = 300
        ) {
            self.capacity = max(1, capacity)
            self.concurrency = max(1, concurrency)
            self.maxAttempts = max(1, maxAttempts)
            self.maxAge = maxAge.isNaN ? 0 : max(0, maxAge)
            self.backoff = backoff
            self.maxRetryAfter = maxRetryAfter.isNaN ? 0 : max(0, maxRetryAfter)
        }
    }

    /// One message's handle for the answer to its request.
    public struct Ticket: Sendable, Hashable, Comparable, CustomStringConvertible {
        public var rawValue: UInt64
        public init(_ rawValue: UInt64) { self.rawValue = rawValue }
        public static func < (lhs: Ticket, rhs: Ticket) -> Bool { lhs.rawValue < rhs.rawValue }
        public var description: String { "#\(rawValue)" }
    }

    /// How a request ended, as the owner saw it.
    public enum Result: Sendable, Hashable {
        /// The receiver answered; `retryAfter` is its `Retry-After` in
        /// seconds when it gave one.
        case answered(status: Int, retryAfter: Double?)
        /// No connection, a reset, a TLS failure: nothing was answered.
        case failed
        /// No full answer within the request's timeout.
        case timedOut
    }

    /// Why a message was given up.
    public enum DropReason: String, Sendable, Hashable, CaseIterable {
        /// The queue was at capacity when it came.
        case queueFull = "queue-full"
        /// The receiver refused it for good (a 4xx other than 408 and 429, or 410).
        case rejected
        /// It grew older than `maxAge` before it could be delivered.
        case expired
        /// Its last allowed attempt failed.
        case attemptsExhausted = "attempts-exhausted"
        /// The sender stopped before it was delivered.
        case shutdown
    }

    /// What the owner does.
    public enum Action: Sendable, Hashable {
        /// POST `body` for `id`; `attempt` is 1 for the first try.
        case send(Ticket, id: String, body: [UInt8], attempt: Int)
        /// The message is given up.
        case dropped(id: String, reason: DropReason)
        /// The receiver took the message (2xx) at attempt `attempts`.
        case delivered(id: String, attempts: Int)
    }

    private enum Stage: Sendable, Hashable {
        /// In the ready line, waiting for a free request.
        case ready
        case inFlight
        /// Waiting out a backoff, in ``retries``.
        case backingOff
    }

    private struct Message: Sendable {
        var id: String
        var body: [UInt8]
        var enqueuedAt: UnixTime
        /// Attempts made so far.
        var attempts: Int
        var stage: Stage
    }

    public let configuration: Configuration
    private var messages: [Ticket: Message] = [:]
    private var ready = FIFOQueue<Ticket>()
    private var retries = DeadlineQueue<Ticket>.ordered
    private var nextTicket: UInt64 = 0
    private var inFlightCount = 0
    private var isShutDown = false

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Messages held: waiting, in flight or backing off.
    public var count: Int { messages.count }

    /// Requests in flight.
    public var inFlight: Int { inFlightCount }

    /// When ``timerFired(now:)`` is next owed a call: the earliest retry.
    public var nextDeadline: UnixTime? {
        mutating get { retries.next }
    }

    /// Queues one message; sends it at once when a request is free.
    public mutating func enqueue(id: String, body: [UInt8], now: UnixTime) -> [Action] {
        if isShutDown { return [.dropped(id: id, reason: .shutdown)] }
        guard messages.count < configuration.capacity else { return [.dropped(id: id, reason: .queueFull)] }
        let ticket = Ticket(nextTicket)
        nextTicket &+= 1
        messages[ticket] = Message(id: id, body: body, enqueuedAt: now, attempts: 0, stage: .ready)
        ready.append(ticket)
        var actions: [Action] = []
        pump(now: now, into: &actions)
        return actions
    }

    /// The request of `ticket` ended with `result`; `draw` (uniform in
    /// `[0, 1)`) spreads the wait before a retry. An answer for a ticket
    /// that is not in flight is ignored.
    public mutating func answered(_ ticket: Ticket, result: Result, now: UnixTime, draw: Double) -> [Action] {
        guard var message = messages[ticket], message.stage == .inFlight else { return [] }
        inFlightCount -= 1
        var actions: [Action] = []
        switch Self.verdict(of: result) {
        case .delivered:
            messages.removeValue(forKey: ticket)
            actions.append(.delivered(id: message.id, attempts: message.attempts))
        case .rejected:
            drop(ticket, message, .rejected, into: &actions)
        case .retry(let retryAfter):
            if isShutDown {
                drop(ticket, message, .shutdown, into: &actions)
            } else if message.attempts >= configuration.maxAttempts {
                drop(ticket, message, .attemptsExhausted, into: &actions)
            } else {
                let wait = retryAfter.map { min(max($0, 0), configuration.maxRetryAfter) }
                    ?? configuration.backoff.delay(attempt: message.attempts, draw: draw)
                let at = now + wait
                if at - message.enqueuedAt > configuration.maxAge {
                    drop(ticket, message, .expired, into: &actions)
                } else {
                    message.stage = .backingOff
                    messages[ticket] = message
                    retries.schedule(ticket, at: at)
                }
            }
        }
        pump(now: now, into: &actions)
        return actions
    }

    /// The timer armed at ``nextDeadline`` fired: retries that are due go
    /// back to the ready line, and are sent as requests come free.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        for ticket in retries.popDue(now: now) {
            guard var message = messages[ticket], message.stage == .backingOff else { continue }
            message.stage = .ready
            messages[ticket] = message
            ready.append(ticket)
        }
        var actions: [Action] = []
        pump(now: now, into: &actions)
        return actions
    }

    /// Stops: every message not in flight is dropped, new ones are dropped
    /// as they come, and a request in flight that fails is not retried.
    public mutating func shutDown() -> [Action] {
        isShutDown = true
        var actions: [Action] = []
        for ticket in messages.keys.sorted() {
            guard let message = messages[ticket], message.stage != .inFlight else { continue }
            drop(ticket, message, .shutdown, into: &actions)
        }
        ready = FIFOQueue()
        retries = DeadlineQueue<Ticket>.ordered
        return actions
    }

    private enum Verdict {
        case delivered
        case rejected
        case retry(after: Double?)
    }

    /// 2xx delivers; 408, 429, 5xx, failures and timeouts are retried; any
    /// other answer (4xx, 410 included, and the 1xx and 3xx a POST should
    /// not get) is final.
    private static func verdict(of result: Result) -> Verdict {
        switch result {
        case .failed, .timedOut:
            return .retry(after: nil)
        case .answered(let status, let retryAfter):
            switch status {
            case 200...299: return .delivered
            case 408, 429, 500...599: return .retry(after: retryAfter.flatMap { $0.isFinite ? $0 : nil })
            default: return .rejected
            }
        }
    }

    private mutating func drop(_ ticket: Ticket, _ message: Message, _ reason: DropReason, into actions: inout [Action]) {
        messages.removeValue(forKey: ticket)
        actions.append(.dropped(id: message.id, reason: reason))
    }

    /// Sends ready messages while requests are free; those past their age
    /// are dropped instead.
    private mutating func pump(now: UnixTime, into actions: inout [Action]) {
        while inFlightCount < configuration.concurrency, let ticket = ready.popFirst() {
            guard var message = messages[ticket], message.stage == .ready else { continue }
            if now - message.enqueuedAt > configuration.maxAge {
                drop(ticket, message, .expired, into: &actions)
                continue
            }
            message.attempts += 1
            message.stage = .inFlight
            messages[ticket] = message
            inFlightCount += 1
            actions.append(.send(ticket, id: message.id, body: message.body, attempt: message.attempts))
        }
    }
}
