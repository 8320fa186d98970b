import LiveDispatchCore

/// Where the partitions of a worker's dispatcher stand, the records in
/// progress and whether back-pressure holds them: a copy of the
/// ``DispatchStage`` machine's view, for the admin endpoint, readiness and
/// the partition gauges.
public struct DispatchStatus: Sendable {
    /// Every partition this worker holds, in any phase.
    public var partitions: [Int32]
    public var restoring: [Int32]
    public var owned: [Int32]
    /// Revoked, and still pushed until the next owner claims them.
    public var lingering: [Int32]
    public var releasing: [Int32]
    public var outstanding: Int
    public var paused: Bool

    init(_ machine: DispatchStage, outstanding: Int) {
        partitions = machine.held
        restoring = machine.partitions(in: .restoring)
        owned = machine.partitions(in: .owned)
        lingering = machine.partitions(in: .lingering)
        releasing = machine.partitions(in: .releasing)
        self.outstanding = outstanding
        paused = machine.isPaused
    }
}
