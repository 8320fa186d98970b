import LiveDispatchCore

/// A worker's `/status`: its phase, the `commands` partitions it owns and
/// the records it has in progress.
public struct WorkerStatus: Equatable, Sendable {
    public var phase: String
    public var partitions: [Int]
    public var inProgress: Int64

    public init?(json: String) {
        guard let status = try? JSONValue.parse(json), let phase = status["phase"]?.stringValue,
              let partitions = status["partitions"]?.arrayValue, let inProgress = status["in_progress"]?.integerValue
        else { return nil }
        self.phase = phase
        self.partitions = partitions.compactMap { $0.integerValue.map(Int.init) }
        self.inProgress = inProgress
    }

    /// The owner of each partition when exactly `workers` workers answer,
    /// none restoring or draining, and every partition has one owner; the
    /// owners number as many as there are workers (or partitions, if fewer).
    public static func owners(_ statuses: [String: WorkerStatus], workers: Int, partitions: Int) -> [Int: String]? {
        // `joining` with partitions: dispatching them, not yet in the router's group.
        let dispatching: Set = ["ready", "standby", "joining"]
        guard statuses.count == workers, statuses.values.allSatisfy({ dispatching.contains($0.phase) }) else { return nil }
        var owners: [Int: String] = [:]
        for (admin, status) in statuses {
            for partition in status.partitions {
                guard owners.updateValue(admin, forKey: partition) == nil else { return nil }
            }
        }
        let owning = statuses.values.filter { !$0.partitions.isEmpty }.count
        guard Set(owners.keys) == Set(0..<partitions), owning == min(workers, partitions) else { return nil }
        return owners
    }
}
