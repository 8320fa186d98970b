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
    typealias Sender = PartitionDispatcher.Sender

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

extension FanOut {
    /// A fan-out that starts sends only when its owner's budget gives it
    /// some (``PartitionDispatcher/continueSending(_:now:)``); its tokens
    /// hold `version` already.
    static func sharingBudget(_ activity: ActivityID, version: UInt64, configuration: Configuration) -> FanOut {
        var fanOut = FanOut(activityID: activity, version: version, configuration: configuration)
        fanOut.allowance = 0
        return fanOut
    }
}
