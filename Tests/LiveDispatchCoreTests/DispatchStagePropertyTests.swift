import LiveDispatchCore
import Testing

/// Two workers' real ``DispatchStage`` machines over one simulated group:
/// random rebalances (lingering or not), lost assignments, mark reads,
/// restores, sends answered, clock steps with each timer delivered on
/// time, back-pressure and demand. After every step: no partition is pushed
/// by both workers, no partition is let go as settled with work
/// outstanding (nor cut short before its release deadline), and the
/// pauses the machines asked for match their gates.
@Suite("Dispatch stage, randomized: two workers over one group")
struct DispatchStagePropertyTests {
    static let partitions: [Int32] = [0, 1, 2, 3]
    static let releaseTimeout = 2.0

    /// One worker: its machine and what its shell would hold.
    struct Worker {
        var stage: DispatchStage
        /// Sends and writes under way per partition.
        var work: [Int32: Int] = [:]
        /// Partitions its group consumer has paused.
        var paused: Set<Int32> = []
        var catchingUp: Set<Int32> = []
        /// When each partition started to release (quiesced).
        var quiescedAt: [Int32: UnixTime] = [:]
    }

    struct Simulation {
        var generator: SplitMix64
        var now = UnixTime(seconds: 1_764_000_000)
        var workers: [Worker]
        /// The group's current owner of each partition; nil between a revocation and the next assignment.
        var owner: [Int32: Int] = [:]
        /// Partitions revoked and not yet assigned again.
        var unassigned: Set<Int32> = Set(DispatchStagePropertyTests.partitions)
        /// The hand-over marks in Kafka, as offsets.
        var marks: [Int32: Int64] = [:]
        var issues: [String] = []

        init(seed: UInt64) {
            generator = SplitMix64(seed: seed)
            let linger = [0.0, 3.0, 8.0]
            workers = (0..<2).map { index in
                Worker(stage: DispatchStage(configuration: .init(
                    ownership: .init(releaseTimeout: DispatchStagePropertyTests.releaseTimeout, lingerTimeout: linger[Int((seed &+ UInt64(index)) % 3)]),
                    highWatermark: 10, lowWatermark: 4, sendLimit: 64)))
            }
        }

        mutating func apply(_ index: Int, _ actions: [DispatchStage.Action], lost: Bool = false, reassigned: Bool = false) {
            for action in actions {
                switch action {
                case .take(let number):
                    workers[index].paused.insert(number)
                case .restore, .linger, .setSendLimit, .observe:
                    break
                case .mark(let number, let mark):
                    marks[number] = mark.offset
                case .quiesce(let number):
                    workers[index].quiescedAt[number] = now
                case .release(let number, _, _, _):
                    let work = workers[index].work[number, default: 0]
                    let settledClaim = actions.contains { action in
                        if case .observe(.handOver(.released(number, _, settled: true))) = action { true } else { false }
                    }
                    if work > 0 && settledClaim { issues.append("partition \(number) released as settled with \(work) under way") }
                    if work > 0, !lost, !reassigned, let since = workers[index].quiescedAt[number], now - since < DispatchStagePropertyTests.releaseTimeout {
                        issues.append("partition \(number) cut short \(now - since) s after its quiesce")
                    }
                    workers[index].work[number] = nil
                    workers[index].paused.remove(number)
                    workers[index].catchingUp.remove(number)
                    workers[index].quiescedAt[number] = nil
                case .pause(let numbers):
                    workers[index].paused.formUnion(numbers)
                case .resume(let numbers):
                    workers[index].paused.subtract(numbers)
                }
            }
        }

        /// What the revocation handler does for a partition not lingering:
        /// it returns only once the partition is released (settled, or at
        /// its release deadline).
        mutating func revoke(_ index: Int, _ number: Int32, lost: Bool) {
            apply(index, workers[index].stage.revoked([number], lost: lost, now: now), lost: lost)
            owner[number] = nil
            unassigned.insert(number)
            while workers[index].stage.phase(of: number) == .releasing {
                if workers[index].work[number, default: 0] == 0 {
                    apply(index, workers[index].stage.settled(number, now: now))
                } else if generator.below(2) == 0 {
                    workers[index].work[number, default: 0] -= 1
                } else if let deadline = workers[index].stage.nextDeadline {
                    advance(to: deadline)
                }
            }
        }

        /// Moves the clock to `target`, delivering each worker's timer at its deadline.
        mutating func advance(to target: UnixTime) {
            while true {
                let due = workers.indices.compactMap { index in workers[index].stage.nextDeadline.map { (index, $0) } }
                    .filter { $0.1 <= target }.min { $0.1 < $1.1 }
                guard let (index, deadline) = due else { break }
                now = max(now, deadline)
                apply(index, workers[index].stage.timerFired(now: now))
            }
            now = max(now, target)
        }

        mutating func step() {
            let index = generator.below(2)
            let number = DispatchStagePropertyTests.partitions[generator.below(DispatchStagePropertyTests.partitions.count)]
            switch generator.below(11) {
            case 0:
                // The group moves the partition: revoked from its owner.
                if let from = owner[number] { revoke(from, number, lost: false) }
            case 1:
                if unassigned.contains(number) {
                    unassigned.remove(number)
                    owner[number] = index
                    apply(index, workers[index].stage.assigned([number], now: now), reassigned: true)
                }
            case 2:
                if owner[number] == index, generator.below(4) == 0 { revoke(index, number, lost: true) }
            case 3:
                for awaiting in workers[index].stage.awaitingMarks {
                    apply(index, workers[index].stage.markRead(awaiting, HandOverMark(offset: marks[awaiting]), now: now))
                }
            case 4:
                if workers[index].stage.mayRestore(number) {
                    _ = workers[index].stage.follow(number)
                    let catchingUp = generator.below(2) == 0
                    if catchingUp { workers[index].catchingUp.insert(number) }
                    apply(index, workers[index].stage.restored(number, catchingUp: catchingUp, now: now))
                }
            case 5:
                if workers[index].catchingUp.remove(number) != nil { apply(index, workers[index].stage.caughtUp(number)) }
            case 6:
                // A push or write starts where the worker may push.
                if workers[index].stage.ownership.mayPush(number) { workers[index].work[number, default: 0] += 1 }
            case 7:
                if workers[index].work[number, default: 0] > 0 {
                    workers[index].work[number, default: 0] -= 1
                    if workers[index].work[number] == 0, workers[index].stage.phase(of: number) == .releasing {
                        apply(index, workers[index].stage.settled(number, now: now))
                    }
                }
            case 8:
                advance(to: now + Double(generator.below(3000)) / 1000)
            case 9:
                apply(index, workers[index].stage.outstandingMoved(to: generator.below(16)))
            default:
                let demand = SendLimitShares.Demand(inFlight: generator.below(40), waiting: generator.below(2) == 0)
                apply(index, workers[index].stage.demandChanged(number, demand))
            }
            check()
        }

        mutating func check() {
            for number in DispatchStagePropertyTests.partitions {
                let pushers = workers.indices.filter { workers[$0].stage.ownership.mayPush(number) }
                if pushers.count > 1 { issues.append("partition \(number) pushed by workers \(pushers) at \(now)") }
            }
            for index in workers.indices {
                let stage = workers[index].stage
                let restored = Set(stage.partitions(in: .owned) + stage.partitions(in: .lingering))
                if stage.isPaused {
                    let unpaused = restored.subtracting(workers[index].catchingUp).subtracting(workers[index].paused)
                    if !unpaused.isEmpty { issues.append("worker \(index) paused with \(unpaused.sorted()) still fetching") }
                } else {
                    let held = restored.intersection(workers[index].paused)
                    if !held.isEmpty { issues.append("worker \(index) open with \(held.sorted()) still paused") }
                }
                if Set(stage.sendLimits.keys) != Set(stage.held) {
                    issues.append("worker \(index) shares its send limit among \(stage.sendLimits.keys.sorted()), holding \(stage.held)")
                }
            }
        }
    }

    @Test(arguments: 0..<40)
    func twoWorkersNeverPushOnePartitionAndLetNothingGoUnsettled(seed: UInt64) {
        var simulation = Simulation(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        for _ in 0..<600 {
            simulation.step()
            if !simulation.issues.isEmpty { break }
        }
        #expect(simulation.issues.isEmpty, "seed \(seed): \(simulation.issues)")
    }
}
