/// Decides when the consumer pauses and resumes its partitions: pause once
/// the records in progress pass the high watermark, resume only once they
/// fall below the low one, so the consumer does not flap at the boundary.
/// The consumer keeps polling while paused (heartbeats, rebalances).
///
/// It also remembers which partitions it holds paused: a partition left
/// reading when the gate closed (one still catching up on its previous
/// owner's commands) is held as soon as it may be, not only at the next
/// pause.
public struct BackpressureGate: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case none
        case pause
        case resume
    }

    public let highWatermark: Int
    public let lowWatermark: Int
    public private(set) var isPaused = false
    /// The partitions this gate paused and has not resumed.
    public private(set) var held: Set<Int32> = []

    public init(highWatermark: Int, lowWatermark: Int) {
        self.highWatermark = max(1, highWatermark)
        self.lowWatermark = min(max(0, lowWatermark), max(1, highWatermark) - 1)
    }

    /// The backlog changed to `outstanding` records.
    public mutating func update(outstanding: Int) -> Action {
        if !isPaused && outstanding >= highWatermark {
            isPaused = true
            return .pause
        }
        if isPaused && outstanding <= lowWatermark {
            isPaused = false
            held = []
            return .resume
        }
        return .none
    }

    /// While paused: those of the partitions it may pause (`pausable`) that
    /// it does not hold yet, now held; the caller pauses them. Nothing
    /// while open.
    public mutating func hold(_ pausable: Set<Int32>) -> Set<Int32> {
        guard isPaused else { return [] }
        let newly = pausable.subtracting(held)
        held.formUnion(newly)
        return newly
    }

    /// Someone else resumed `partition` (a restore that ended while it
    /// catches up): no longer held, so it is held again once it may be.
    public mutating func released(_ partition: Int32) {
        held.remove(partition)
    }
}
