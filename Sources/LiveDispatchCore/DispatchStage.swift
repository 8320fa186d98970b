/// Every decision of a worker's dispatcher stage, over the `commands`
/// partitions it holds: where the stage stands in its groups, how each
/// partition moves in and out (``PartitionOwnership``), which co-partitions
/// and lingering commands the second consumer reads, when back-pressure
/// pauses and resumes (``BackpressureGate``), how the limit on sends in
/// flight is shared (``SendLimitShares``), and how far this worker's router
/// wrote each partition.
///
/// Inputs are `mutating func`s that return actions; the dispatcher keeps
/// the machine under one lock and performs the actions after releasing it.
/// Time is passed in (the wall clock: hand-over marks carry dates that
/// other workers read).
public struct DispatchStage: Sendable {
    public struct Configuration: Sendable, Hashable {
        public var ownership: PartitionOwnership.Configuration
        public var highWatermark: Int
        public var lowWatermark: Int
        /// The worker's limit on sends in flight, shared among its partitions.
        public var sendLimit: Int

        public init(ownership: PartitionOwnership.Configuration, highWatermark: Int, lowWatermark: Int, sendLimit: Int) {
            self.ownership = ownership
            self.highWatermark = highWatermark
            self.lowWatermark = lowWatermark
            self.sendLimit = sendLimit
        }
    }

    /// Where the stage stands, for `/readyz` and `/status`.
    public enum Phase: String, Sendable, Hashable {
        /// Not part of both groups yet (no assignment of `<group_id>` since the
        /// last lost one, or none yet of `<group_id>.router`).
        case joining
        /// Some held partitions are still restoring.
        case restoring
        /// Every held partition is restored and dispatching.
        case ready
        /// Joined, holds no partition (more workers than partitions): ready to take over.
        case standby
        /// Shutting down.
        case draining
    }

    public enum Action: Sendable, Hashable {
        /// Start holding the partition: a new partition machine, its records
        /// paused; read its ``HandOverMark``.
        case take(Int32)
        /// The previous owner has let go: follow the co-partitions and read the changelogs.
        case restore(Int32)
        /// Revoked, and still pushed: read its commands outside the group
        /// from where its partition machine stands (their offsets are not
        /// committed from now on).
        case linger(Int32)
        /// Write the partition's mark.
        case mark(Int32, HandOverMark)
        /// Start no new send or write; keep taking the answers of those under way.
        case quiesce(Int32)
        /// Let go: close the partition machine; commit what it finished when
        /// `commit`; stop reading its co-partitions when `unfollow`, and its
        /// commands on the second consumer when `lingered`.
        case release(Int32, commit: Bool, unfollow: Bool, lingered: Bool)
        /// Stop fetching these partitions' records (commands, tokens, starts).
        case pause([Int32])
        /// Fetch these partitions' records again.
        case resume([Int32])
        /// Give the partition this share of the worker's limit on sends in flight.
        case setSendLimit(Int32, Int)
        case observe(Observation)
    }

    public enum Observation: Sendable, Hashable {
        case handOver(PartitionOwnership.Observation)
        /// The records in progress passed the high watermark: partitions paused.
        case paused
        /// They fell below the low watermark: partitions resumed.
        case resumed
        /// Partitions that caught up on their previous owner's commands while
        /// back-pressure holds the others, paused now.
        case heldOnceCaughtUp([Int32])
    }

    /// The stage's life: in its groups (or joining them), then draining.
    private enum Lifecycle: Sendable, Hashable {
        case running(groupJoined: Bool, routerJoined: Bool)
        /// Shutting down; `reportsIdle` once it waits for its partitions to be idle.
        case draining(reportsIdle: Bool)
    }

    public let configuration: Configuration
    public private(set) var ownership: PartitionOwnership
    public private(set) var gate: BackpressureGate
    private var lifecycle = Lifecycle.running(groupJoined: false, routerJoined: false)
    /// Restored partitions still reading their previous owner's commands:
    /// they read on while back-pressure pauses the others.
    private var catchingUp: Set<Int32> = []
    /// The partitions whose co-partitions the second consumer reads.
    public private(set) var followed: Set<Int32> = []
    /// The lingering partitions whose commands the second consumer reads.
    public private(set) var lingering: Set<Int32> = []
    /// Per partition, the offset after the last command this worker's router wrote there.
    public private(set) var writtenEnds: [Int32: Int64] = [:]
    private var demands: [Int32: SendLimitShares.Demand] = [:]
    /// Each held partition's share of the send limit, as last given.
    public private(set) var sendLimits: [Int32: Int] = [:]

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.ownership = PartitionOwnership(configuration: configuration.ownership)
        self.gate = BackpressureGate(highWatermark: configuration.highWatermark, lowWatermark: configuration.lowWatermark)
    }

    // MARK: Queries

    public func phase(of number: Int32) -> PartitionOwnership.Phase? { ownership.phase(of: number) }
    public func partitions(in phase: PartitionOwnership.Phase) -> [Int32] { ownership.partitions(in: phase) }
    public var held: [Int32] { ownership.held }
    public var nextDeadline: UnixTime? { ownership.nextDeadline }
    public var awaitingMarks: [Int32] { ownership.awaitingMarks }
    public func mayRestore(_ number: Int32) -> Bool { ownership.mayRestore(number) }
    public var isPaused: Bool { gate.isPaused }

    public var phase: Phase {
        switch lifecycle {
        case .draining: return .draining
        case .running(let group, let router) where !group || !router: return .joining
        case .running:
            if ownership.held.isEmpty { return .standby }
            return ownership.partitions(in: .restoring).isEmpty ? .ready : .restoring
        }
    }

    /// Whether the stage waits for its partitions to be idle (draining, nobody to hand them to).
    public var reportsIdle: Bool {
        switch lifecycle {
        case .draining(let reportsIdle): reportsIdle
        case .running: false
        }
    }

    /// The commands of `number` not read yet: from `next` (the offset after
    /// the last one read, negative before one) to the partition's end as
    /// its last fetch told it (`fetched`), or as far as this worker's
    /// router wrote it when that is further (a paused partition fetches nothing).
    public func unread(_ number: Int32, next: Int64, fetched: Int64?) -> Int {
        let end = max(fetched ?? 0, writtenEnds[number] ?? 0)
        guard next >= 0, end > next else { return 0 }
        return Int(clamping: end - next)
    }

    /// Whether every command of `number` Kafka has told of (`fetched`) and
    /// this worker's router wrote has been read (`next`, the offset after
    /// the last one read, negative before one), with the partition owned.
    public func hasReadAll(_ number: Int32, next: Int64, fetched: Int64?) -> Bool {
        guard ownership.phase(of: number) == .owned, let fetched else { return false }
        let end = max(fetched, writtenEnds[number] ?? 0)
        return next >= end || (next < 0 && end == 0)
    }

    // MARK: Groups

    /// The group assigned `numbers` (incrementally: only the new ones).
    public mutating func assigned(_ numbers: [Int32], now: UnixTime) -> [Action] {
        if case .running(_, let router) = lifecycle { lifecycle = .running(groupJoined: true, routerJoined: router) }
        return perform(ownership.assigned(numbers, now: now))
    }

    /// The router stage received an assignment of its group (possibly empty).
    public mutating func routerAssigned() {
        if case .running(let group, _) = lifecycle { lifecycle = .running(groupJoined: group, routerJoined: true) }
    }

    /// The group revoked `numbers`; `lost` when the member lost its assignment.
    public mutating func revoked(_ numbers: [Int32], lost: Bool, now: UnixTime) -> [Action] {
        if lost, case .running(_, let router) = lifecycle { lifecycle = .running(groupJoined: false, routerJoined: router) }
        return perform(ownership.revoked(numbers, lost: lost, now: now))
    }

    // MARK: Hand-over

    public mutating func markRead(_ number: Int32, _ mark: HandOverMark, now: UnixTime) -> [Action] {
        perform(ownership.markRead(number, mark, now: now))
    }

    /// Whether the co-partitions of `number` may be followed now (it is
    /// still held, restoring); when so, they count as followed from here.
    public mutating func follow(_ number: Int32) -> Bool {
        guard ownership.phase(of: number) == .restoring else { return false }
        followed.insert(number)
        return true
    }

    /// The partition's changelogs are read; `catchingUp` when it still
    /// reads its previous owner's commands before pushing.
    public mutating func restored(_ number: Int32, catchingUp: Bool, now: UnixTime) -> [Action] {
        if catchingUp, ownership.phase(of: number) == .restoring { self.catchingUp.insert(number) }
        return perform(ownership.restored(number, now: now))
    }

    /// A restored partition read its previous owner's commands: back-pressure may hold it now.
    public mutating func caughtUp(_ number: Int32) -> [Action] {
        guard catchingUp.remove(number) != nil else { return [] }
        let newly = holdPausable()
        return newly.isEmpty ? [] : [.pause(newly), .observe(.heldOnceCaughtUp(newly))]
    }

    /// A releasing partition has no send or write under way any more.
    public mutating func settled(_ number: Int32, now: UnixTime) -> [Action] {
        perform(ownership.settled(number, now: now))
    }

    /// Acts on every deadline that has passed.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        perform(ownership.timerFired(now: now))
    }

    // MARK: Shutdown

    /// Shutting down: the stage is draining.
    public mutating func drain() {
        lifecycle = .draining(reportsIdle: false)
    }

    /// Nobody will take the partitions over (the group's only member):
    /// what lingers stops, every held partition pauses, and the stage waits
    /// for them to be idle.
    public mutating func leave(now: UnixTime) -> [Action] {
        lifecycle = .draining(reportsIdle: true)
        let held = ownership.held
        return perform(ownership.leave(now: now)) + (held.isEmpty ? [] : [.pause(held)])
    }

    // MARK: Back-pressure and sends

    /// The records in progress over all partitions moved to `total`: pause
    /// every restored partition (but those catching up) above the high
    /// watermark, resume them below the low one.
    public mutating func outstandingMoved(to total: Int) -> [Action] {
        switch gate.update(outstanding: total) {
        case .none:
            return []
        case .pause:
            let newly = holdPausable()
            return (newly.isEmpty ? [] : [.pause(newly)]) + [.observe(.paused)]
        case .resume:
            let restored = restoredPartitions
            return (restored.isEmpty ? [] : [.resume(restored)]) + [.observe(.resumed)]
        }
    }

    /// A partition's demand for sends changed: the shares follow it.
    public mutating func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand) -> [Action] {
        guard ownership.phase(of: number) != nil, demands[number] != demand else { return [] }
        // While no partition waits, the shares are even whatever is in flight.
        let wasWaiting = demands.values.contains(where: \.waiting)
        demands[number] = demand
        return wasWaiting || demand.waiting ? shareSendLimit() : []
    }

    /// A command this worker's router wrote landed at `offset` of `number`.
    public mutating func commandWritten(_ number: Int32, offset: Int64) {
        if offset >= writtenEnds[number, default: 0] { writtenEnds[number] = offset + 1 }
    }

    // MARK: Translating the ownership's actions

    private var restoredPartitions: [Int32] {
        (ownership.partitions(in: .owned) + ownership.partitions(in: .lingering)).sorted()
    }

    /// Holds, while paused, the restored partitions not catching up that
    /// the gate does not hold yet; returns them, in order.
    private mutating func holdPausable() -> [Int32] {
        gate.hold(Set(restoredPartitions).subtracting(catchingUp)).sorted()
    }

    private mutating func perform(_ actions: [PartitionOwnership.Action]) -> [Action] {
        var result: [Action] = []
        var sharesMoved = false
        for action in actions {
            switch action {
            case .take(let number):
                demands[number] = SendLimitShares.Demand(inFlight: 0, waiting: false)
                sharesMoved = true
                result.append(.take(number))
            case .restore(let number):
                result.append(.restore(number))
            case .resume(let number):
                // Back-pressure holds a restored partition, unless it catches up.
                if !gate.isPaused || catchingUp.contains(number) {
                    gate.released(number)
                    result.append(.resume([number]))
                }
            case .linger(let number):
                lingering.insert(number)
                result.append(.linger(number))
            case .mark(let number, let mark):
                result.append(.mark(number, mark))
            case .quiesce(let number):
                result.append(.quiesce(number))
            case .release(let number, let commit):
                let unfollow = followed.remove(number) != nil
                let lingered = lingering.remove(number) != nil
                gate.released(number)
                catchingUp.remove(number)
                demands.removeValue(forKey: number)
                sendLimits.removeValue(forKey: number)
                sharesMoved = true
                result.append(.release(number, commit: commit, unfollow: unfollow, lingered: lingered))
            case .observe(let observation):
                result.append(.observe(.handOver(observation)))
            }
        }
        return sharesMoved ? result + shareSendLimit() : result
    }

    /// Shares the send limit among the held partitions by their demand;
    /// returns the shares that changed.
    private mutating func shareSendLimit() -> [Action] {
        let numbers = demands.keys.sorted()
        let shares = SendLimitShares.shares(of: configuration.sendLimit, among: numbers.map { demands[$0, default: .init(inFlight: 0, waiting: false)] })
        var actions: [Action] = []
        for (number, share) in zip(numbers, shares) where sendLimits[number] != share {
            sendLimits[number] = share
            actions.append(.setSendLimit(number, share))
        }
        return actions
    }
}
