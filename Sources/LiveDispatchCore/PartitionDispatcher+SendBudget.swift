/// The partition's share of the worker's sends in flight, given out to
/// its fan-outs in turn (see ``SendBudget``).
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
    mutating func withFanOut<Result>(_ sender: Sender, _ body: (inout FanOut) -> Result) -> Result? {
        switch sender {
        case .activity(let activity): activities.withFanOut(activity, body)
        case .audienceStart(let offset): audienceStarts.withFanOut(offset, body)
        }
    }

    /// Called once `sender`'s fan-out actions are performed: when tokens of
    /// it wait for a send, starts as many as the budget has left, or puts
    /// it in line behind those already waiting. Returns the fan-out's
    /// actions to perform next.
    mutating func continueSending(_ sender: Sender, now: UnixTime) -> [FanOut.Action] {
        guard withFanOut(sender, { $0.wantsToSend }) == true else { return [] }
        if sendBudget.isLineEmpty && sendBudget.available > 0 { return resume(sender, now: now) }
        sendBudget.wait(sender)
        return []
    }

    /// Gives `sender`'s fan-out everything the budget has left and starts its sends.
    private mutating func resume(_ sender: Sender, now: UnixTime) -> [FanOut.Action] {
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
            actions += perform(resume(sender, now: now), for: sender, now: now)
        }
        return actions
    }
}
