/// Which partitions of the dispatcher group a worker owns, and how each one
/// moves in and out of its hands.
///
/// The group assigns `commands` partitions incrementally (cooperative
/// rebalancing): a rebalance revokes only the partitions that move, and a
/// moved partition is assigned to its new owner only after the old owner's
/// revocation has returned. This machine decides what happens between:
///
/// - **Taken** (`restoring`): a new partition machine restores the
///   partition's changelogs; the co-partitioned topics (`tokens`, `starts`)
///   are followed from their committed offsets. No push yet.
/// - **Owned**: restored; the partition pushes.
/// - **Releasing**: revoked cleanly. No new send or write starts; the sends
///   and writes already under way are awaited, so what they finish is
///   committed and the next owner does not do it again, for at most
///   ``Configuration/releaseTimeout``. Then it is released: the partition
///   machine closes, its offsets are committed and its co-partitions are no
///   longer followed, and only then does the revocation return.
///
/// A lost assignment (the member was thrown out of the group) is released at
/// once and commits nothing: another member may own the partition already,
/// and it redoes whatever was not committed.
public struct PartitionOwnership: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Longest a revoked partition waits for its sends and writes under way.
        public var releaseTimeout: Double

        public init(releaseTimeout: Double = 2) {
            self.releaseTimeout = releaseTimeout
        }
    }

    public enum Phase: String, Sendable, Hashable, CaseIterable {
        case restoring
        case owned
        case releasing
    }

    public enum Action: Sendable, Hashable {
        /// Start owning the partition: a new partition machine, its
        /// co-partitions followed, its records held until it is restored,
        /// and its changelogs read.
        case take(Int32)
        /// Restored: let its records flow and push.
        case resume(Int32)
        /// Revoked: start no new send or write; keep taking the answers of those under way.
        case quiesce(Int32)
        /// Let go: close the partition machine; when `commit`, commit the
        /// offsets of what it finished; stop following its co-partitions.
        case release(Int32, commit: Bool)
        case observe(Observation)
    }

    public enum Observation: Sendable, Hashable {
        /// From the assignment to the end of the restore: the part of a move
        /// that the new owner spends.
        case takenOver(Int32, seconds: Double)
        /// From the revocation to the release: the part of a move that the
        /// old owner spends. `settled` is false when work under way was cut
        /// short (the timeout passed or the assignment was lost).
        case released(Int32, seconds: Double, settled: Bool)
    }

    private struct Entry: Sendable, Hashable {
        var phase: Phase
        /// When the current phase began.
        var since: UnixTime
        /// When a releasing partition lets go whatever is still under way.
        var deadline: UnixTime?
    }

    public let configuration: Configuration
    private var entries: [Int32: Entry] = [:]

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The phase of `number`, or nil when this worker does not hold it.
    public func phase(of number: Int32) -> Phase? { entries[number]?.phase }

    /// The partitions in `phase`, in order.
    public func partitions(in phase: Phase) -> [Int32] {
        entries.filter { $0.value.phase == phase }.keys.sorted()
    }

    /// Every partition this worker holds, in any phase, in order.
    public var held: [Int32] { entries.keys.sorted() }

    /// The partitions this worker may push for: restored and not revoked.
    public func mayPush(_ number: Int32) -> Bool { entries[number]?.phase == .owned }

    /// The earliest release deadline; nil when nothing is releasing.
    public var nextDeadline: UnixTime? {
        entries.values.compactMap(\.deadline).min()
    }

    /// The group assigned `numbers` (incrementally: only the new ones).
    public mutating func assigned(_ numbers: [Int32], now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for number in Set(numbers).sorted() {
            if let entry = entries[number] {
                guard entry.phase == .releasing else { continue }
                // Assigned back before its release finished: finish it first.
                actions += release(number, commit: true, settled: false, now: now)
            }
            entries[number] = Entry(phase: .restoring, since: now)
            actions.append(.take(number))
        }
        return actions
    }

    /// The partition's changelogs are read.
    public mutating func restored(_ number: Int32, now: UnixTime) -> [Action] {
        guard let entry = entries[number], entry.phase == .restoring else { return [] }
        entries[number] = Entry(phase: .owned, since: now)
        return [.resume(number), .observe(.takenOver(number, seconds: max(0, now - entry.since)))]
    }

    /// The group revoked `numbers`; `lost` when the member lost its assignment.
    public mutating func revoked(_ numbers: [Int32], lost: Bool, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for number in Set(numbers).sorted() {
            guard let entry = entries[number] else { continue }
            switch (entry.phase, lost) {
            case (_, true):
                actions += release(number, commit: false, settled: false, now: now)
            case (.restoring, false):
                // Nothing was pushed or written: nothing to wait for.
                actions += release(number, commit: true, settled: true, now: now)
            case (.owned, false):
                entries[number] = Entry(phase: .releasing, since: now, deadline: now + max(0, configuration.releaseTimeout))
                actions.append(.quiesce(number))
            case (.releasing, false):
                continue
            }
        }
        return actions
    }

    /// A releasing partition has no send or write under way any more.
    public mutating func settled(_ number: Int32, now: UnixTime) -> [Action] {
        guard entries[number]?.phase == .releasing else { return [] }
        return release(number, commit: true, settled: true, now: now)
    }

    /// Releases the partitions whose release deadline has passed.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        let due = entries.filter { $0.value.deadline.map { $0 <= now } ?? false }.keys.sorted()
        return due.flatMap { release($0, commit: true, settled: false, now: now) }
    }

    private mutating func release(_ number: Int32, commit: Bool, settled: Bool, now: UnixTime) -> [Action] {
        guard let entry = entries.removeValue(forKey: number) else { return [] }
        let since = entry.phase == .releasing ? entry.since : now
        return [.release(number, commit: commit), .observe(.released(number, seconds: max(0, now - since), settled: settled))]
    }
}
