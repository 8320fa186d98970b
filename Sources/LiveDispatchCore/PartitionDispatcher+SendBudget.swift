/// The partition's sends in flight against its limit, and the fan-outs
/// waiting for a share of it, served in turn.
///
/// Each activity's ``FanOut`` bounds its own sends in flight; this bounds
/// the partition's, so that a thousand activities fanned out at once hold
/// the partition's limit in flight, not a thousand times their own. The
/// fan-outs of a partition keep an ``FanOut/allowance`` of 0: one that has
/// tokens ready asks (``PartitionDispatcher/continueSending(_:now:)``) and
/// is either given what the budget has left or put in line; sends that end
/// give their place to the line, first come first served, so one large
/// activity cannot keep the others waiting.
struct SendBudget: Sendable {
    /// Whose fan-out waits.
    enum Sender: Hashable, Sendable {
        case activity(ActivityID)
        /// The audience start at this offset on `starts`.
        case audienceStart(Int64)
    }

    private(set) var limit: Int
    private(set) var inFlight = 0
    private var line = FIFOQueue<Sender>()
    private var waiting: Set<Sender> = []

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Sends that may start now.
    var available: Int { max(0, limit - inFlight) }

    /// Places freed before the line is served: a turn costs a few lookups
    /// by activity id, so under a large limit a turn starts a run of sends
    /// rather than one (at most 1/32 of the limit is held back for it).
    var turnSize: Int { max(1, min(64, limit / 32)) }
    var isLineEmpty: Bool { waiting.isEmpty }

    mutating func started() { inFlight += 1 }
    mutating func ended() { inFlight = max(0, inFlight - 1) }
    mutating func setLimit(_ newLimit: Int) { limit = max(1, newLimit) }

    /// Puts `sender` at the end of the line unless it is in it already.
    mutating func wait(_ sender: Sender) {
        if waiting.insert(sender).inserted { line.append(sender) }
    }

    /// The first sender in line, taken out of it.
    mutating func next() -> Sender? {
        while let sender = line.popFirst() {
            if waiting.remove(sender) != nil { return sender }
        }
        return nil
    }
}

extension PartitionDispatcher {
    /// Sends handed out and not yet reported back by ``sendCompleted(_:outcome:now:jitter:)``.
    public var sendsInFlight: Int { sendBudget.inFlight }
    /// The partition's limit on ``sendsInFlight``.
    public var sendLimit: Int { sendBudget.limit }
    /// Its sends in flight and whether fan-outs wait for a place: what the
    /// worker shares its limit by (``SendLimitShares``).
    public var sendDemand: SendLimitShares.Demand {
        SendLimitShares.Demand(inFlight: sendBudget.inFlight, waiting: !sendBudget.isLineEmpty)
    }

    /// Changes the partition's limit on sends in flight (the worker shares
    /// its own among the partitions it owns); a higher limit starts sends
    /// that waited for it.
    public mutating func setSendLimit(_ limit: Int, now: UnixTime) -> [Action] {
        sendBudget.setLimit(limit)
        return serveWaitingSenders(now: now)
    }

    /// Runs `body` on the fan-out of `sender`; nil when it has none.
    private mutating func withFanOut<Result>(_ sender: SendBudget.Sender, _ body: (inout FanOut) -> Result) -> Result? {
        switch sender {
        case .activity(let activity):
            guard var delivery = deliveries.removeValue(forKey: activity) else { return nil }
            defer { deliveries[activity] = delivery }
            return body(&delivery.fanOut)
        case .audienceStart(let offset):
            guard var delivery = audienceDeliveries.removeValue(forKey: offset) else { return nil }
            defer { audienceDeliveries[offset] = delivery }
            return body(&delivery.fanOut)
        }
    }

    /// Called once `sender`'s fan-out actions are performed: when tokens of
    /// it wait for a send, starts as many as the budget has left, or puts
    /// it in line behind those already waiting. Returns the fan-out's
    /// actions to perform next.
    mutating func continueSending(_ sender: SendBudget.Sender, now: UnixTime) -> [FanOut.Action] {
        let wantsToSend =
            switch sender {
            case .activity(let activity): deliveries[activity]?.fanOut.wantsToSend == true
            case .audienceStart(let offset): audienceDeliveries[offset]?.fanOut.wantsToSend == true
            }
        guard wantsToSend else { return [] }
        if sendBudget.isLineEmpty && sendBudget.available > 0 { return resume(sender, now: now) }
        sendBudget.wait(sender)
        return []
    }

    /// Gives `sender`'s fan-out everything the budget has left and starts its sends.
    private mutating func resume(_ sender: SendBudget.Sender, now: UnixTime) -> [FanOut.Action] {
        let allowance = sendBudget.available
        return withFanOut(sender) { fanOut in
            fanOut.allowance = allowance
            defer { fanOut.allowance = 0 }
            return fanOut.resume(now: now)
        } ?? []
    }

    /// Serves the line while the budget has sends left; a sender still
    /// waiting after its turn goes back to the end.
    mutating func serveWaitingSenders(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        guard sendBudget.available >= sendBudget.turnSize else { return actions }
        while sendBudget.available > 0, let sender = sendBudget.next() {
            let fanOutActions = resume(sender, now: now)
            switch sender {
            case .activity(let activity): actions += perform(fanOutActions, for: activity, now: now)
            case .audienceStart(let offset): actions += performAudienceStart(fanOutActions, offset, now: now)
            }
        }
        return actions
    }
}
