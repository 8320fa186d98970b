/// The router stage's decisions, kept under the router's one lock: which
/// domain partitions its group gave it and how far each may be committed
/// (``OffsetTracker``), when routing pauses and resumes
/// (``BackpressureGate``, counting the dispatcher's backlog), shutting
/// down, and which partitions it routes on after giving them up
/// (``RoutingHandOver``).
///
/// The router feeds it its consumers' events, each event's completion,
/// the dispatcher's backlog and the time, and performs the actions it
/// returns; it keeps one ``MachineTimer`` armed at ``nextDeadline`` and
/// calls ``timerFired(now:)`` when it fires. Its time is the router's
/// monotonic clock (the event loop's uptime): its deadlines bound waits
/// and come from no record.
public struct RoutingStage: Sendable {
    public typealias Partition = OffsetTracker.Partition

    public enum Action: Sendable, Equatable {
        /// Pause these partitions of the group's consumer: assigned while routing is paused.
        case pause([Partition])
        /// Pause every partition read, the group's and the hand-over's: the gate closed.
        case pauseAll
        /// Resume every partition read: the gate opened.
        case resumeAll
        /// Store this next offset to commit for the partition.
        case commit(Partition, offset: Int64)
        /// Read `partition` from `offset` on the hand-over reader, routing
        /// without committing; paused when routing is.
        case startHandOver(Partition, from: Int64, paused: Bool)
        /// Stop reading `partition` on the hand-over reader.
        case stopHandOver(Partition, RoutingHandOver<Partition>.Reason)
    }

    private var tracker = OffsetTracker()
    private var gate: BackpressureGate
    private var handOver: RoutingHandOver<Partition>
    /// Shutting down: the partitions stay paused, and a revocation hands nothing over.
    public private(set) var isDraining = false

    public init(gate: BackpressureGate, handOverLimit: Duration) {
        self.gate = gate
        self.handOver = RoutingHandOver(limit: handOverLimit)
    }

    /// Events read from the group and not yet completed.
    public var outstanding: Int { tracker.outstanding }
    /// Whether routing is paused.
    public var isPaused: Bool { gate.isPaused }
    /// The partitions the group assigned.
    public var assigned: [Partition] { tracker.assignedPartitions }
    /// The partitions routed on after being given up.
    public var handingOver: [Partition] { handOver.partitions.sorted() }
    /// No partition is routed on after being given up.
    public var isHandOverIdle: Bool { handOver.isIdle }
    /// When ``timerFired(now:)`` next has something to do.
    public var nextDeadline: UnixTime? { handOver.nextDeadline }

    /// The group assigned `partitions`: they are tracked, paused when
    /// routing is, and no longer routed on as given up.
    public mutating func assigned(_ partitions: [Partition]) -> [Action] {
        for partition in partitions { tracker.assign(partition) }
        var actions: [Action] = gate.isPaused || isDraining ? [.pause(partitions)] : []
        actions += partitions.compactMap { handOver.assigned($0).map(action) }
        return actions
    }

    /// The group revoked `partitions` (`lost`: taken without a revocation,
    /// their position may be someone else's by now). Each is routed on
    /// from after its last event read until its new owner routes it,
    /// unless it was lost, nothing was read of it, or the stage is
    /// shutting down; its events in progress no longer count.
    public mutating func revoked(_ partitions: [Partition], lost: Bool, now: UnixTime) -> [Action] {
        partitions.compactMap { partition in
            let lastRead = isDraining || lost ? nil : tracker.lastRead(partition)
            tracker.revoke(partition)
            return handOver.revoked(partition, lastRead: lastRead, now: now).map(action)
        }
    }

    /// An event of `partition` at `offset` was read: from the group
    /// (`tracked`, committed once done) or on the hand-over reader (never
    /// committed). `downstream`: the dispatcher's backlog now.
    public mutating func read(_ partition: Partition, offset: Int64, tracked: Bool, downstream: Int, now: UnixTime) -> [Action] {
        if tracked {
            // An offset at or below one read before is a repeat, counted once.
            try? tracker.read(partition, offset: offset)
        } else {
            handOver.routed(partition, offset: offset, now: now)
        }
        return backpressure(downstream: downstream)
    }

    /// Everything the event of `partition` at `offset` produced is stored.
    public mutating func completed(_ partition: Partition, offset: Int64, downstream: Int) -> [Action] {
        var actions: [Action] = []
        // A partition revoked since no longer commits.
        if let commit = (try? tracker.complete(partition, offset: offset)) ?? nil {
            actions.append(.commit(commit.partition, offset: commit.offset))
        }
        return actions + backpressure(downstream: downstream)
    }

    /// The dispatcher's backlog is `downstream` now.
    public mutating func downstream(_ downstream: Int) -> [Action] {
        backpressure(downstream: downstream)
    }

    /// The router stops reading for its group, which assigns it `owned`:
    /// the partitions stay paused. Returns each with the last offset read
    /// from it, for ``leaving(_:now:within:)`` when others may take them over.
    public mutating func drain(owned: [Partition]) -> [(partition: Partition, lastRead: Int64?)] {
        isDraining = true
        return owned.map { ($0, tracker.lastRead($0)) }
    }

    /// The router leaves its group and others may take its partitions over:
    /// each partition in `owned` is routed on until its new owner routes it,
    /// it is quiet, or `within` has passed.
    public mutating func leaving(_ owned: [(partition: Partition, lastRead: Int64?)], now: UnixTime, within: Duration) -> [Action] {
        handOver.leaving(owned, now: now, within: within).map(action)
    }

    /// The group's committed next offsets of the partitions handed over.
    public mutating func committed(_ offsets: [Partition: Int64]) -> [Action] {
        handOver.committed(offsets).map(action)
    }

    /// The timer armed at ``nextDeadline`` fired.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        handOver.expire(now: now).map(action)
    }

    /// The router shuts down: every hand-over stops and none starts.
    public mutating func stop() -> [Action] {
        handOver.stop().map(action)
    }

    /// The gate's decision for the events in progress and `downstream`
    /// more; a draining stage never resumes.
    private mutating func backpressure(downstream: Int) -> [Action] {
        let (sum, overflow) = tracker.outstanding.addingReportingOverflow(max(0, downstream))
        switch gate.update(outstanding: overflow ? Int.max : sum) {
        case .none: return []
        case .pause: return [.pauseAll]
        case .resume: return isDraining ? [] : [.resumeAll]
        }
    }

    /// A hand-over's action; a partition starts paused when routing is.
    private func action(_ action: RoutingHandOver<Partition>.Action) -> Action {
        switch action {
        case .start(let partition, let from): .startHandOver(partition, from: from, paused: gate.isPaused)
        case .stop(let partition, let reason): .stopHandOver(partition, reason)
        }
    }
}
