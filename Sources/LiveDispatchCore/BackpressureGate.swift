/// Decides when the consumer pauses and resumes its partitions: pause once
/// the records in progress pass the high watermark, resume only once they
/// fall below the low one, so the consumer does not flap at the boundary.
/// The consumer keeps polling while paused (heartbeats, rebalances).
public struct BackpressureGate: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case none
        case pause
        case resume
    }

    public let highWatermark: Int
    public let lowWatermark: Int
    public private(set) var isPaused = false

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
            return .resume
        }
        return .none
    }
}
