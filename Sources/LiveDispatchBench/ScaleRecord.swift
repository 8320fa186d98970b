import Kafka
import LiveDispatchCore

/// What `bench scale` publishes and what the simulator received, kept
/// compactly: per event its publication and the first push carrying it (or
/// a later state of its activity), per token the newest score it holds, per
/// partition the times of its pushes. Times are Unix seconds, the
/// simulator's clock for pushes.
///
/// Token `i` belongs to activity `i % activities`; its hex (`FaultScenario.token`)
/// carries `i` in its second group of eight digits.
public struct ScaleRecord: Sendable {
    public let activities: Int
    public let tokens: Int
    public let partitions: Int
    /// The `commands` partition of each activity (murmur2 of its id, as the router keys commands).
    public let partitionOf: [Int]
    /// The `sports.scores` partition of each activity's events (murmur2 of its match id, as the benchmark keys them).
    public let eventPartitionOf: [Int]
    /// Per activity, per score - 1: when the event raising it to that score was published.
    public private(set) var publishedAt: [[Double]]
    /// Per activity, per score - 1: when the first push of that score or a later one arrived.
    public private(set) var firstPushAt: [[Double]]
    /// Per token: the newest score it received (0 before any).
    public private(set) var newest: [Int32]
    /// Per partition: when its pushes arrived, in the order read.
    public private(set) var pushTimes: [[Double]]
    /// Per `sports.scores` partition: when the pushes of its activities arrived.
    public private(set) var eventPushTimes: [[Double]]
    public private(set) var pushes = 0
    /// Pushes of the score the token already held.
    public private(set) var duplicates = 0
    /// Pushes of a score older than one the token already held.
    public private(set) var olderAfterNewer = 0
    /// Pushes to tokens the run did not register, or without a score.
    public private(set) var unknown = 0
    public private(set) var lastPushAt: Double?
    /// Records the benchmark's producer held (queued or in flight), sampled as it publishes.
    private var backlog: [(at: Double, records: Int)] = []

    public init(activities: Int, tokens: Int, partitions: Int) {
        self.activities = activities
        self.tokens = tokens
        self.partitions = partitions
        partitionOf = (0..<activities).map {
            Int(Murmur2Partitioner.partition(forKey: "match-" + FaultScenario.matchID($0), partitionCount: partitions))
        }
        eventPartitionOf = (0..<activities).map {
            Int(Murmur2Partitioner.partition(forKey: FaultScenario.matchID($0), partitionCount: partitions))
        }
        publishedAt = Array(repeating: [], count: activities)
        firstPushAt = Array(repeating: [], count: activities)
        newest = Array(repeating: 0, count: tokens)
        pushTimes = Array(repeating: [], count: partitions)
        eventPushTimes = Array(repeating: [], count: partitions)
    }

    /// The token of index `index`, registered on activity `index % activities`.
    public func token(_ index: Int) -> String { FaultScenario.token(activity: index % activities, index: index) }

    /// Records the publication of `activity`'s next event; returns its score.
    public mutating func published(_ activity: Int, at time: Double) -> Int {
        publishedAt[activity].append(time)
        firstPushAt[activity].append(.nan)
        return publishedAt[activity].count
    }

    public mutating func producerHeld(_ records: Int, at time: Double) {
        backlog.append((time, records))
    }

    /// The most records the benchmark's producer held within `window`.
    public func producerBacklog(within window: ClosedRange<Double>) -> Int {
        backlog.filter { window.contains($0.at) }.map(\.records).max() ?? 0
    }

    /// Records one accepted push, in the order the simulator accepted them.
    public mutating func received(_ push: RecordedPushLine) {
        pushes += 1
        guard let index = tokenIndex(push.token), push.score >= 1, push.score <= Int64(Int32.max) else {
            unknown += 1
            return
        }
        let score = Int32(push.score)
        if score < newest[index] {
            olderAfterNewer += 1
        } else if score == newest[index] {
            duplicates += 1
        } else {
            newest[index] = score
        }
        let activity = index % activities
        // Every event up to this score is now on a device: the first push carrying it (or a later state).
        var event = min(Int(score), publishedAt[activity].count) - 1
        while event >= 0, firstPushAt[activity][event].isNaN {
            firstPushAt[activity][event] = push.receivedAt
            event -= 1
        }
        pushTimes[partitionOf[activity]].append(push.receivedAt)
        eventPushTimes[eventPartitionOf[activity]].append(push.receivedAt)
        lastPushAt = push.receivedAt
    }

    private func tokenIndex(_ token: String) -> Int? {
        let digits = token.utf8.dropFirst(8).prefix(8)
        guard digits.count == 8, let index = Int(Substring(digits), radix: 16), index < tokens,
              token == self.token(index)
        else { return nil }
        return index
    }

    /// Activities whose final score some token has not received.
    public var lostActivities: Int {
        var lost = Set<Int>()
        for index in 0..<tokens {
            let activity = index % activities
            if newest[index] != Int32(clamping: publishedAt[activity].count) { lost.insert(activity) }
        }
        return lost.count
    }

    public var duplicatePercent: Double { pushes == 0 ? 0 : Double(duplicates) * 100 / Double(pushes) }

    /// Event-to-push latencies, in seconds, of the events published within
    /// `published` on `partitions`, and how many of those were never pushed.
    public func latencies(published window: ClosedRange<Double>, partitions: Set<Int>) -> (seconds: [Double], unpushed: Int) {
        latencies(published: window) { partitions.contains(partitionOf[$0]) }
    }

    /// Event-to-push latencies, in seconds, of the events published within
    /// `published` of the activities `included`, and how many of those were never pushed.
    public func latencies(published window: ClosedRange<Double>, of included: (Int) -> Bool) -> (seconds: [Double], unpushed: Int) {
        var seconds: [Double] = []
        var unpushed = 0
        for activity in 0..<activities where included(activity) {
            for (event, published) in publishedAt[activity].enumerated() where window.contains(published) {
                let pushed = firstPushAt[activity][event]
                if pushed.isNaN { unpushed += 1 } else { seconds.append(pushed - published) }
            }
        }
        return (seconds, unpushed)
    }

    /// The longest stretch without a push to `partition` that ends within
    /// `window`: from a push to the next one when that next one falls in the
    /// window, and from the last push (before or in the window) to the
    /// window's end: the whole window when the partition had no push by then.
    public func longestGap(partition: Int, endingWithin window: ClosedRange<Double>) -> Double {
        Self.longestGap(pushTimes[partition].sorted(), endingWithin: window)
    }

    /// ``longestGap(partition:endingWithin:)`` for the activities whose events are on `sports.scores` partition `eventPartition`.
    public func longestGap(eventPartition: Int, endingWithin window: ClosedRange<Double>) -> Double {
        Self.longestGap(eventPushTimes[eventPartition].sorted(), endingWithin: window)
    }

    public static func longestGap(_ sorted: [Double], endingWithin window: ClosedRange<Double>) -> Double {
        var longest = 0.0
        var previous: Double?
        for time in sorted {
            if time > window.upperBound { break }
            if let previous, time > window.lowerBound { longest = max(longest, time - previous) }
            previous = time
        }
        return max(longest, window.upperBound - (previous ?? window.lowerBound))
    }

    /// The nearest-rank percentile (`fraction` of 1) of `values`; nil when empty.
    public static func percentile(_ fraction: Double, of values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Int(saturating: (fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}
