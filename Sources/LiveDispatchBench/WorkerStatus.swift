import LiveDispatchCore

/// A worker's `/status`: its phase, the `commands` partitions it owns and
/// the records it has in progress.
public struct WorkerStatus: Equatable, Sendable {
    public var phase: String
    public var partitions: [Int]
    public var inProgress: Int64
    /// Partitions restoring, lingering or releasing: moving in or out.
    public var moving: Int
    /// The domain partitions its router's group assigns it, per topic.
    public var routing: [String: [Int]]

    public init?(json: String) {
        guard let status = try? JSONValue.parse(json), let phase = status["phase"]?.stringValue,
              let partitions = status["partitions"]?.arrayValue, let inProgress = status["in_progress"]?.integerValue
        else { return nil }
        self.phase = phase
        self.partitions = partitions.compactMap { $0.integerValue.map(Int.init) }
        self.inProgress = inProgress
        moving = ["restoring", "lingering", "releasing"].reduce(0) { $0 + (status[$1]?.arrayValue?.count ?? 0) }
        var routing: [String: [Int]] = [:]
        for (topic, numbers) in status["routing"]?.objectValue ?? [:] {
            routing[topic] = (numbers.arrayValue ?? []).compactMap { $0.integerValue.map(Int.init) }
        }
        self.routing = routing
    }

    /// The owner of each partition when exactly `workers` workers answer,
    /// none restoring or draining, no partition moving in or out, and every
    /// partition has one owner; the owners number as many as there are
    /// workers (or partitions, if fewer) and own as many partitions each,
    /// give or take one, as the assignor leaves them once it is done.
    public static func owners(_ statuses: [String: WorkerStatus], workers: Int, partitions: Int) -> [Int: String]? {
        // `joining` with partitions: dispatching them, not yet in the router's group.
        let dispatching: Set = ["ready", "standby", "joining"]
        guard statuses.count == workers, statuses.values.allSatisfy({ dispatching.contains($0.phase) && $0.moving == 0 }) else { return nil }
        var owners: [Int: String] = [:]
        for (admin, status) in statuses {
            for partition in status.partitions {
                guard owners.updateValue(admin, forKey: partition) == nil else { return nil }
            }
        }
        let shares = statuses.values.map(\.partitions.count).filter { $0 > 0 }
        guard Set(owners.keys) == Set(0..<partitions), shares.count == min(workers, partitions),
              let fewest = shares.min(), let most = shares.max(), most - fewest <= 1
        else { return nil }
        return owners
    }

    /// The router of each partition of `topic` when exactly `workers`
    /// workers answer and their routers' group assigns every partition of
    /// it to one of them.
    public static func routers(_ statuses: [String: WorkerStatus], workers: Int, topic: String, partitions: Int) -> [Int: String]? {
        guard statuses.count == workers else { return nil }
        var routers: [Int: String] = [:]
        for (admin, status) in statuses {
            for partition in status.routing[topic] ?? [] {
                guard routers.updateValue(admin, forKey: partition) == nil else { return nil }
            }
        }
        return Set(routers.keys) == Set(0..<partitions) ? routers : nil
    }
}
