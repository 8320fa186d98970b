import LiveDispatchCore
import Testing

@Suite("Webhook queue")
struct WebhookQueueTests {
    static let t0 = UnixTime(seconds: 1_000)

    static func queue(
        capacity: Int = 10, concurrency: Int = 2, maxAttempts: Int = 3, maxAge: Double = 3_600,
        backoff: Backoff = Backoff(base: 1, cap: 60, jitter: .full), maxRetryAfter: Double = 120
    ) -> WebhookQueue {
        WebhookQueue(configuration: .init(
            capacity: capacity, concurrency: concurrency, maxAttempts: maxAttempts, maxAge: maxAge, backoff: backoff,
            maxRetryAfter: maxRetryAfter))
    }

    static func sends(_ actions: [WebhookQueue.Action]) -> [(WebhookQueue.Ticket, String, Int)] {
        actions.compactMap { if case .send(let ticket, let id, _, let attempt) = $0 { (ticket, id, attempt) } else { nil } }
    }

    @Test("messages are sent at once up to the concurrency, the rest as answers free requests")
    func concurrency() throws {
        var queue = Self.queue(concurrency: 2)
        let first = queue.enqueue(id: "a", body: [1], now: Self.t0)
        #expect(first == [.send(.init(0), id: "a", body: [1], attempt: 1)])
        #expect(Self.sends(queue.enqueue(id: "b", body: [2], now: Self.t0)).map { $0.1 } == ["b"])
        #expect(queue.enqueue(id: "c", body: [3], now: Self.t0).isEmpty)
        #expect(queue.inFlight == 2 && queue.count == 3)
        let answered = queue.answered(.init(0), result: .answered(status: 204, retryAfter: nil), now: Self.t0 + 1, draw: 0)
        #expect(answered == [.delivered(id: "a", attempts: 1), .send(.init(2), id: "c", body: [3], attempt: 1)])
        #expect(queue.count == 2)
    }

    @Test("a full queue drops the new message as queue-full and keeps the old ones")
    func queueFull() {
        var queue = Self.queue(capacity: 2, concurrency: 1)
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.enqueue(id: "b", body: [], now: Self.t0)
        #expect(queue.enqueue(id: "c", body: [], now: Self.t0) == [.dropped(id: "c", reason: .queueFull)])
        #expect(queue.count == 2)
    }

    @Test("408, 429, 5xx, failures and timeouts are retried after the full-jitter backoff, at the timer")
    func retriedResults() {
        for result in [WebhookQueue.Result.answered(status: 408, retryAfter: nil), .answered(status: 429, retryAfter: nil),
                       .answered(status: 500, retryAfter: nil), .answered(status: 503, retryAfter: nil), .failed, .timedOut] {
            var queue = Self.queue()
            _ = queue.enqueue(id: "a", body: [7], now: Self.t0)
            // First retry: ceiling 1 s, draw 0.5 → 0.5 s.
            #expect(queue.answered(.init(0), result: result, now: Self.t0 + 2, draw: 0.5).isEmpty)
            #expect(queue.nextDeadline == Self.t0 + 2.5)
            #expect(queue.timerFired(now: Self.t0 + 2.4).isEmpty)
            #expect(queue.timerFired(now: Self.t0 + 2.5) == [.send(.init(0), id: "a", body: [7], attempt: 2)])
            // Second retry: ceiling 2 s, draw 0.75 → 1.5 s.
            _ = queue.answered(.init(0), result: result, now: Self.t0 + 3, draw: 0.75)
            #expect(queue.nextDeadline == Self.t0 + 4.5)
        }
    }

    @Test("Retry-After is honoured and capped")
    func retryAfter() {
        var queue = Self.queue(maxRetryAfter: 120)
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.answered(.init(0), result: .answered(status: 429, retryAfter: 30), now: Self.t0, draw: 0)
        #expect(queue.nextDeadline == Self.t0 + 30)
        _ = queue.timerFired(now: Self.t0 + 30)
        _ = queue.answered(.init(0), result: .answered(status: 503, retryAfter: 86_400), now: Self.t0 + 31, draw: 0)
        #expect(queue.nextDeadline == Self.t0 + 151)
    }

    @Test("4xx other than 408 and 429, 410 included, is rejected at once; so are redirects")
    func rejected() {
        for status in [400, 401, 403, 404, 410, 413, 422, 301, 302] {
            var queue = Self.queue()
            _ = queue.enqueue(id: "a", body: [], now: Self.t0)
            #expect(queue.answered(.init(0), result: .answered(status: status, retryAfter: 5), now: Self.t0, draw: 0)
                == [.dropped(id: "a", reason: .rejected)], "status \(status)")
            #expect(queue.count == 0 && queue.nextDeadline == nil)
        }
    }

    @Test("the last allowed attempt failing drops the message as attempts-exhausted")
    func attemptsExhausted() {
        var queue = Self.queue(maxAttempts: 2)
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.answered(.init(0), result: .failed, now: Self.t0, draw: 0)
        #expect(Self.sends(queue.timerFired(now: Self.t0)).map { $0.2 } == [2])
        #expect(queue.answered(.init(0), result: .timedOut, now: Self.t0 + 1, draw: 0) == [.dropped(id: "a", reason: .attemptsExhausted)])
        #expect(queue.count == 0)
    }

    @Test("a retry that would come after max age drops the message as expired, and so does a wait for a free request")
    func expired() {
        var queue = Self.queue(concurrency: 1, maxAge: 10)
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.enqueue(id: "b", body: [], now: Self.t0)
        // b waits behind a, which hangs until its timeout past b's age.
        let afterTimeout = queue.answered(.init(0), result: .answered(status: 503, retryAfter: 2), now: Self.t0 + 9, draw: 0)
        #expect(afterTimeout == [.dropped(id: "a", reason: .expired), .send(.init(1), id: "b", body: [], attempt: 1)])
        var late = Self.queue(concurrency: 1, maxAge: 10)
        _ = late.enqueue(id: "a", body: [], now: Self.t0)
        _ = late.enqueue(id: "b", body: [], now: Self.t0)
        #expect(late.answered(.init(0), result: .answered(status: 200, retryAfter: nil), now: Self.t0 + 11, draw: 0)
            == [.delivered(id: "a", attempts: 1), .dropped(id: "b", reason: .expired)])
    }

    @Test("shutting down drops what is not in flight and everything that comes after; a failed request in flight is not retried")
    func shutdown() {
        var queue = Self.queue(concurrency: 1)
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.enqueue(id: "b", body: [], now: Self.t0)
        #expect(queue.shutDown() == [.dropped(id: "b", reason: .shutdown)])
        #expect(queue.enqueue(id: "c", body: [], now: Self.t0) == [.dropped(id: "c", reason: .shutdown)])
        #expect(queue.answered(.init(0), result: .failed, now: Self.t0, draw: 0) == [.dropped(id: "a", reason: .shutdown)])
        #expect(queue.count == 0 && queue.nextDeadline == nil)
    }

    @Test("an answer for a ticket not in flight is ignored")
    func staleAnswer() {
        var queue = Self.queue()
        _ = queue.enqueue(id: "a", body: [], now: Self.t0)
        _ = queue.answered(.init(0), result: .failed, now: Self.t0, draw: 0)
        #expect(queue.answered(.init(0), result: .answered(status: 200, retryAfter: nil), now: Self.t0, draw: 0).isEmpty)
        #expect(queue.answered(.init(42), result: .answered(status: 200, retryAfter: nil), now: Self.t0, draw: 0).isEmpty)
        #expect(queue.count == 1 && queue.inFlight == 0)
    }

    @Test("randomized: every message ends once, within the bounds", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomized(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let configuration = WebhookQueue.Configuration(
            capacity: 1 + random.below(20), concurrency: 1 + random.below(4), maxAttempts: 1 + random.below(6),
            maxAge: Double(5 + random.below(200)), backoff: Backoff(base: 0.5, cap: 30, jitter: .full),
            maxRetryAfter: Double(1 + random.below(60)))
        var queue = WebhookQueue(configuration: configuration)
        var now = Self.t0
        var enqueuedAt: [String: UnixTime] = [:]
        var ended: [String: WebhookQueue.Action] = [:]
        var inFlight: [WebhookQueue.Ticket: (id: String, attempt: Int)] = [:]
        var idOfTicket: [WebhookQueue.Ticket: String] = [:]
        var sends: [String: Int] = [:]
        var answeredAt: [String: UnixTime] = [:]
        var nextID = 0

        func perform(_ actions: [WebhookQueue.Action]) {
            for action in actions {
                switch action {
                case .send(let ticket, let id, _, let attempt):
                    #expect(ended[id] == nil, "seed \(seed): \(id) sent after it ended")
                    #expect(inFlight[ticket] == nil, "seed \(seed): \(ticket) sent twice at once")
                    #expect(idOfTicket[ticket, default: id] == id)
                    idOfTicket[ticket] = id
                    sends[id, default: 0] += 1
                    #expect(attempt == sends[id], "seed \(seed): attempts of \(id) are numbered in order")
                    #expect(attempt <= configuration.maxAttempts)
                    if let start = enqueuedAt[id] { #expect(now - start <= configuration.maxAge, "seed \(seed): \(id) sent past max age") }
                    if let last = answeredAt[id] { #expect(now >= last) }
                    inFlight[ticket] = (id, attempt)
                case .dropped(let id, let reason):
                    #expect(ended[id] == nil, "seed \(seed): \(id) ended twice")
                    ended[id] = action
                    if reason == .attemptsExhausted { #expect(sends[id] == configuration.maxAttempts) }
                case .delivered(let id, let attempts):
                    #expect(ended[id] == nil, "seed \(seed): \(id) ended twice")
                    #expect(attempts == sends[id])
                    ended[id] = action
                }
            }
            #expect(queue.inFlight <= configuration.concurrency)
            #expect(queue.inFlight == inFlight.count)
            #expect(queue.count <= configuration.capacity)
            // Nothing is stranded: a held message is in flight or has a wake-up.
            if queue.count > 0, queue.inFlight == 0 { #expect(queue.nextDeadline != nil, "seed \(seed): a message waits for nothing") }
        }

        func answerOne() {
            guard let ticket = inFlight.keys.sorted()[safe: random.below(inFlight.count)], let sent = inFlight.removeValue(forKey: ticket) else { return }
            let results: [WebhookQueue.Result] = [
                .answered(status: 200, retryAfter: nil), .answered(status: 204, retryAfter: nil), .answered(status: 503, retryAfter: nil),
                .answered(status: 429, retryAfter: Double(random.below(300))), .answered(status: 410, retryAfter: nil),
                .answered(status: 400, retryAfter: nil), .failed, .timedOut, .answered(status: 500, retryAfter: nil),
            ]
            let result = results[random.below(results.count)]
            answeredAt[sent.id] = now
            perform(queue.answered(ticket, result: result, now: now, draw: random.unit()))
        }

        for _ in 0..<2_000 {
            switch random.below(10) {
            case 0, 1, 2:
                let id = "m\(nextID)"
                nextID += 1
                enqueuedAt[id] = now
                perform(queue.enqueue(id: id, body: [UInt8(truncatingIfNeeded: nextID)], now: now))
            case 3, 4, 5, 6:
                answerOne()
            case 7:
                if let deadline = queue.nextDeadline { now = max(now, deadline) }
                perform(queue.timerFired(now: now))
            default:
                now = now + Double(random.below(2_000)) / 100
            }
        }
        // Drain: answer everything in flight and fire every timer until nothing is held.
        var rounds = 0
        while queue.count > 0 {
            rounds += 1
            try #require(rounds < 10_000, "seed \(seed): the queue never drained")
            if !inFlight.isEmpty {
                answerOne()
            } else if let deadline = queue.nextDeadline {
                now = max(now, deadline)
                perform(queue.timerFired(now: now))
            } else {
                Issue.record("seed \(seed): \(queue.count) messages held with nothing in flight and no deadline")
                break
            }
        }
        #expect(ended.count == nextID, "seed \(seed): every message ends exactly once")
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
