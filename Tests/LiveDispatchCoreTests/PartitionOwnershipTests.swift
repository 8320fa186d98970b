@testable import LiveDispatchCore
import Testing

@Suite("Partition ownership: taking, owning and releasing partitions")
struct PartitionOwnershipTests {
    let start = UnixTime(seconds: 1_764_000_000)

    /// Assigns `numbers` and reads a released mark for each: taken, nobody lingering.
    func take(_ ownership: inout PartitionOwnership, _ numbers: [Int32], now: UnixTime) {
        _ = ownership.assigned(numbers, now: now)
        for number in numbers { _ = ownership.markRead(number, .released, now: now) }
    }

    @Test("an assigned partition restores, then owns and pushes; the take-over time is observed")
    func takeAndRestore() {
        var ownership = PartitionOwnership()
        #expect(ownership.assigned([3, 1, 3], now: start) == [.take(1), .take(3)])
        #expect(ownership.phase(of: 1) == .restoring)
        #expect(!ownership.mayPush(1))
        #expect(ownership.awaitingMarks == [1, 3])
        // Its restore may not start or end before its mark was read.
        #expect(!ownership.mayRestore(1))
        #expect(ownership.restored(1, now: start).isEmpty)
        #expect(ownership.markRead(1, .released, now: start) == [.restore(1)])
        #expect(ownership.mayRestore(1))
        #expect(ownership.markRead(3, .released, now: start) == [.restore(3)])
        #expect(ownership.awaitingMarks.isEmpty)
        // Assigned again while held: nothing new.
        #expect(ownership.assigned([1], now: start + 0.1).isEmpty)
        let actions = ownership.restored(1, now: start + 0.75)
        #expect(actions == [.resume(1), .observe(.takenOver(1, seconds: 0.75))])
        #expect(ownership.mayPush(1))
        #expect(!ownership.mayRestore(1))
        #expect(ownership.partitions(in: .owned) == [1])
        #expect(ownership.partitions(in: .restoring) == [3])
        // A second restore report changes nothing.
        #expect(ownership.restored(1, now: start + 1).isEmpty)
    }

    @Test("a revoked owned partition quiesces, and is released with a commit once settled")
    func releaseWhenSettled() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2))
        take(&ownership, [0, 1], now: start)
        _ = ownership.restored(0, now: start)
        _ = ownership.restored(1, now: start)
        #expect(ownership.revoked([1], lost: false, now: start + 10) == [.quiesce(1)])
        #expect(ownership.phase(of: 1) == .releasing)
        #expect(!ownership.mayPush(1))
        #expect(ownership.mayPush(0))
        #expect(ownership.nextDeadline == start + 12)
        // Before its deadline, the timer releases nothing.
        #expect(ownership.timerFired(now: start + 11).isEmpty)
        let actions = ownership.settled(1, now: start + 10.25)
        #expect(actions == [.release(1, commit: true), .observe(.released(1, seconds: 0.25, settled: true))])
        #expect(ownership.phase(of: 1) == nil)
        #expect(ownership.nextDeadline == nil)
        #expect(ownership.held == [0])
    }

    @Test("a release that does not settle in time is cut short at its deadline, still committing what was finished")
    func releaseAtDeadline() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2))
        take(&ownership, [5], now: start)
        _ = ownership.restored(5, now: start)
        _ = ownership.revoked([5], lost: false, now: start + 1)
        #expect(ownership.timerFired(now: start + 3) == [.release(5, commit: true), .observe(.released(5, seconds: 2, settled: false))])
        #expect(ownership.held.isEmpty)
        // Settling afterwards is a late report about a partition let go.
        #expect(ownership.settled(5, now: start + 4).isEmpty)
    }

    @Test("a lost assignment is released at once and commits nothing, in any phase")
    func lost() {
        var ownership = PartitionOwnership()
        take(&ownership, [0, 1, 2], now: start)
        _ = ownership.restored(1, now: start)
        _ = ownership.restored(2, now: start)
        _ = ownership.revoked([2], lost: false, now: start + 1)
        let actions = ownership.revoked([0, 1, 2], lost: true, now: start + 1.5)
        #expect(actions == [
            .release(0, commit: false), .observe(.released(0, seconds: 0, settled: false)),
            .release(1, commit: false), .observe(.released(1, seconds: 0, settled: false)),
            .release(2, commit: false), .observe(.released(2, seconds: 0.5, settled: false)),
        ])
        #expect(ownership.held.isEmpty)
    }

    @Test("a partition revoked while restoring is released at once; revoking one not held does nothing")
    func revokedWhileRestoring() {
        var ownership = PartitionOwnership()
        _ = ownership.assigned([4], now: start)
        #expect(ownership.revoked([4, 9], lost: false, now: start + 1) == [.release(4, commit: true), .observe(.released(4, seconds: 0, settled: true))])
        // Its restore finishing later does not make it owned.
        #expect(ownership.restored(4, now: start + 2).isEmpty)
        #expect(ownership.phase(of: 4) == nil)
    }

    @Test("assigned back while still releasing: the release finishes first, then a fresh take")
    func assignedWhileReleasing() {
        var ownership = PartitionOwnership()
        take(&ownership, [7], now: start)
        _ = ownership.restored(7, now: start)
        _ = ownership.revoked([7], lost: false, now: start + 1)
        #expect(ownership.assigned([7], now: start + 1.5) == [
            .release(7, commit: true), .observe(.released(7, seconds: 0.5, settled: false)), .take(7),
        ])
        #expect(ownership.phase(of: 7) == .restoring)
    }

    @Test("a partition a rebalance revokes lingers and pushes on until its next owner claims it, then releases and marks it released")
    func lingerUntilClaimed() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, lingerTimeout: 5))
        take(&ownership, [2], now: start)
        _ = ownership.restored(2, now: start)
        let until = start + 15
        #expect(ownership.revoked([2], lost: false, now: start + 10) == [.linger(2), .mark(2, .lingering(until: until))])
        #expect(ownership.phase(of: 2) == .lingering)
        #expect(ownership.mayPush(2))
        #expect(ownership.awaitingMarks == [2])
        #expect(ownership.nextDeadline == until)
        // Its own mark, read back, changes nothing; a claim ends the linger.
        #expect(ownership.markRead(2, .lingering(until: until), now: start + 11).isEmpty)
        #expect(ownership.markRead(2, .claimed(until: until), now: start + 13) == [
            .observe(.lingered(2, seconds: 3, claimed: true)), .quiesce(2),
        ])
        #expect(!ownership.mayPush(2))
        #expect(ownership.phase(of: 2) == .releasing)
        #expect(ownership.settled(2, now: start + 13.5) == [
            .release(2, commit: true), .mark(2, .released), .observe(.released(2, seconds: 0.5, settled: true)),
        ])
        #expect(ownership.held.isEmpty)
    }

    @Test("nobody claims a lingering partition: it stops at its deadline and is released as usual")
    func lingerDeadline() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, lingerTimeout: 5))
        take(&ownership, [2], now: start)
        _ = ownership.restored(2, now: start)
        _ = ownership.revoked([2], lost: false, now: start)
        #expect(ownership.timerFired(now: start + 4.9).isEmpty)
        #expect(ownership.timerFired(now: start + 5) == [.observe(.lingered(2, seconds: 5, claimed: false)), .quiesce(2)])
        #expect(ownership.timerFired(now: start + 7) == [
            .release(2, commit: true), .mark(2, .released), .observe(.released(2, seconds: 2, settled: false)),
        ])
    }

    @Test("a new owner claims a lingering partition and waits for its release before restoring")
    func newOwnerWaitsForRelease() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, clockSkew: 0.5))
        let until = start + 5
        #expect(ownership.assigned([6], now: start + 3) == [.take(6)])
        #expect(ownership.markRead(6, .lingering(until: until), now: start + 3) == [.mark(6, .claimed(until: until))])
        #expect(ownership.nextDeadline == start + 7.5)
        #expect(ownership.restored(6, now: start + 3.2).isEmpty)
        #expect(ownership.markRead(6, .claimed(until: until), now: start + 3.2).isEmpty)
        #expect(!ownership.mayPush(6))
        #expect(ownership.markRead(6, .released, now: start + 3.5) == [.restore(6), .observe(.waitedForRelease(6, seconds: 0.5, released: true))])
        #expect(ownership.awaitingMarks.isEmpty)
        #expect(ownership.restored(6, now: start + 3.75) == [.resume(6), .observe(.takenOver(6, seconds: 0.75))])
    }

    @Test("a previous owner that never releases (it died lingering) is waited for until its deadline, release timeout and clock skew have passed")
    func newOwnerGivesUpWaiting() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, clockSkew: 0.5))
        let until = start + 5
        _ = ownership.assigned([6], now: start)
        #expect(ownership.markRead(6, .claimed(until: until), now: start).isEmpty)
        #expect(ownership.timerFired(now: start + 7.4).isEmpty)
        #expect(ownership.timerFired(now: start + 7.5) == [.restore(6), .observe(.waitedForRelease(6, seconds: 7.5, released: false))])
        // A mark whose deadline is long past is not waited for at all.
        _ = ownership.assigned([8], now: start + 20)
        #expect(ownership.markRead(8, .lingering(until: until), now: start + 20) == [
            .restore(8), .observe(.waitedForRelease(8, seconds: 0, released: false)),
        ])
    }

    @Test("a mark whose deadline lies hours ahead (a clock far off, or written by no worker) is waited for no longer than the longest linger")
    func farMarkIsCapped() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, clockSkew: 0.5))
        let until = start + 3600
        _ = ownership.assigned([3], now: start)
        #expect(ownership.markRead(3, .lingering(until: until), now: start) == [.mark(3, .claimed(until: until))])
        #expect(ownership.nextDeadline == start + PartitionOwnership.longestLinger + 2.5)
        // Reading it again does not push the wait further.
        #expect(ownership.markRead(3, .claimed(until: until), now: start + 30).isEmpty)
        #expect(ownership.nextDeadline == start + PartitionOwnership.longestLinger + 2.5)
        #expect(ownership.timerFired(now: start + PartitionOwnership.longestLinger + 2.5) == [
            .restore(3), .observe(.waitedForRelease(3, seconds: PartitionOwnership.longestLinger + 2.5, released: false)),
        ])
        // A worker configured to linger longer lingers the longest linger.
        var lingering = PartitionOwnership(configuration: .init(lingerTimeout: 600))
        _ = lingering.assigned([1], now: start)
        _ = lingering.markRead(1, .released, now: start)
        _ = lingering.restored(1, now: start)
        #expect(lingering.revoked([1], lost: false, now: start) == [.linger(1), .mark(1, .lingering(until: start + PartitionOwnership.longestLinger))])
    }

    @Test("a leaving worker stops lingering, and what it gives up from then on is released at once")
    func leavingStopsLingering() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, lingerTimeout: 5))
        take(&ownership, [0, 1], now: start)
        _ = ownership.restored(0, now: start)
        _ = ownership.restored(1, now: start)
        _ = ownership.revoked([0], lost: false, now: start + 1)
        #expect(ownership.leave(now: start + 2) == [.observe(.lingered(0, seconds: 1, claimed: false)), .quiesce(0)])
        #expect(ownership.revoked([1], lost: false, now: start + 2) == [.quiesce(1)])
        #expect(ownership.partitions(in: .releasing) == [0, 1])
    }

    @Test("assigned back while lingering: released and marked released first, then taken afresh")
    func assignedBackWhileLingering() {
        var ownership = PartitionOwnership(configuration: .init(releaseTimeout: 2, lingerTimeout: 5))
        take(&ownership, [4], now: start)
        _ = ownership.restored(4, now: start)
        _ = ownership.revoked([4], lost: false, now: start + 1)
        #expect(ownership.assigned([4], now: start + 3) == [
            .release(4, commit: true), .mark(4, .released), .observe(.released(4, seconds: 0, settled: false)), .take(4),
        ])
    }

    @Test("a mark survives its encoding as an offset; what no writer makes reads as released")
    func markEncoding() {
        let until = UnixTime(seconds: 1_764_000_123.456)
        for mark in [HandOverMark.released, .lingering(until: until), .claimed(until: until)] {
            #expect(HandOverMark(offset: mark.offset) == mark)
        }
        #expect(HandOverMark(offset: nil) == .released)
        #expect(HandOverMark(offset: -1001) == .released)
        #expect(HandOverMark(offset: .max).until != nil)
        #expect(HandOverMark.lingering(until: UnixTime(seconds: .infinity)).offset > 0)
        #expect(HandOverMark.lingering(until: UnixTime(seconds: -5)).offset == 2)
    }

    @Test("random scale events, crashes and lost assignments over 4 workers, some lingering and some not: no two owners push, every record is pushed, commits never skip one", arguments: 0..<40)
    func randomizedFleet(seed: UInt64) {
        var fleet = FleetModel(seed: seed, partitions: 6)
        for _ in 0..<400 { fleet.step() }
        fleet.settle()
        #expect(fleet.violations.isEmpty, "seed \(seed): \(fleet.violations.prefix(5))")
        #expect(fleet.pushedRecords > 0)
        // Duplicates come only from work a lost, crashed or timed-out owner
        // had not committed; they stay a small share.
        #expect(Double(fleet.duplicates) <= 0.25 * Double(fleet.pushedRecords), "seed \(seed): \(fleet.duplicates) of \(fleet.pushedRecords)")
    }
}

/// A group of workers, each with its own ``PartitionOwnership``, consuming a
/// log per partition: a cooperative coordinator moves partitions (revoking
/// from the old owner, whose revocation runs to its release before the new
/// owner gets it), workers crash (their partitions reassigned after a
/// session timeout) or lose their assignment, and sends complete in random
/// order. It checks that only an owner the machine lets push starts a
/// send, that no two workers may push one partition at once, that a new
/// owner starts at a committed offset below which every record was pushed,
/// and that every record is pushed once everything settles. Some workers
/// linger (as a fleet part-way through a configuration change would): a
/// lingering owner reads on outside the group and commits nothing of its
/// commands, and the workers meet through one ``HandOverMark`` per
/// partition, read and written at random moments.
struct FleetModel {
    struct Runner {
        /// The next offset to read (read = its send started).
        var position: Int64
        /// Offsets whose send is under way.
        var inFlight: Set<Int64> = []
        /// Offsets whose send completed, not yet folded into `done`.
        var completed: Set<Int64> = []
        /// Every offset below is pushed and may be committed.
        var done: Int64
        var quiesced = false
        /// Read outside the group since its revocation: its commands are not committed.
        var lingered = false
    }

    struct Worker {
        var ownership: PartitionOwnership
        var runners: [Int32: Runner] = [:]
        var alive = true
        /// Stopped with SIGTERM while others remain: out of the group, and
        /// alive until what it lets linger is claimed and released.
        var leaving = false

        /// Alive and in the group.
        var isMember: Bool { alive && !leaving }
    }

    var generator: SplitMix64
    let partitions: Int32
    var now = UnixTime(seconds: 1_764_000_000)
    var workers: [Worker] = []
    /// The group's view: which worker each partition is assigned to.
    var assignment: [Int32: Int] = [:]
    var logEnd: [Int32: Int64] = [:]
    var committed: [Int32: Int64] = [:]
    var pushed: [Int32: Set<Int64>] = [:]
    var marks: [Int32: HandOverMark] = [:]
    /// Per partition, how far the `state` changelog holds what was pushed:
    /// a record below is a repeat to its next owner (the snapshot's source
    /// mark covers it), applied without a send.
    var snapshotted: [Int32: Int64] = [:]
    var pushedRecords = 0
    var duplicates = 0
    var violations: [String] = []

    init(seed: UInt64, partitions: Int32) {
        generator = SplitMix64(seed: seed)
        self.partitions = partitions
        workers = []
        workers = [newWorker()]
        rebalance()
    }

    private mutating func newWorker() -> Worker {
        Worker(ownership: PartitionOwnership(configuration: .init(releaseTimeout: 2, lingerTimeout: generator.below(3) == 0 ? 0 : 3)))
    }

    mutating func step() {
        now = now + 0.01 + generator.unit() * 0.05
        switch generator.below(100) {
        case 0..<40: append()
        case 40..<70: progress()
        case 70..<75: completeRestores()
        case 75..<78: readMarks()
        case 78..<84: autoCommit()
        case 84..<90 where workers.filter(\.isMember).count < 4:
            workers.append(newWorker())
            rebalance()
        case 90..<95 where workers.filter(\.isMember).count > 1:
            leave(pick(alive: true), crash: generator.below(3) == 0)
        case 95..<97 where workers.filter(\.isMember).count > 1:
            loseAssignment(pick(alive: true))
        default: append()
        }
        timers()
        for index in workers.indices where workers[index].leaving && workers[index].alive && workers[index].ownership.held.isEmpty {
            workers[index].alive = false
            workers[index].runners = [:]
        }
        checkSinglePusher()
    }

    mutating func settle() {
        for _ in 0..<200 {
            now = now + 0.1
            readMarks()
            timers()
            completeRestores()
            progress(all: true)
            checkSinglePusher()
        }
        for (index, worker) in workers.enumerated() where worker.alive {
            for number in worker.runners.keys { fold(index, number) }
        }
        for number in 0..<partitions {
            let end = logEnd[number, default: 0]
            let missing = (0..<end).filter { !(pushed[number]?.contains($0) ?? false) }
            if !missing.isEmpty { violations.append("partition \(number): records \(missing.prefix(5)) never pushed") }
        }
    }

    private mutating func pick(alive: Bool) -> Int {
        let candidates = workers.indices.filter { workers[$0].isMember == alive }
        return candidates[generator.below(candidates.count)]
    }

    private mutating func append() {
        let number = Int32(generator.below(Int(partitions)))
        logEnd[number, default: 0] += Int64(1 + generator.below(3))
    }

    /// Owners start sends of records they have read and complete some under way.
    private mutating func progress(all: Bool = false) {
        for index in workers.indices where workers[index].alive {
            for number in workers[index].runners.keys.sorted() { progress(index, number, all: all) }
        }
    }

    /// One runner starts sends while the machine lets it push, and some of
    /// its sends under way complete.
    private mutating func progress(_ index: Int, _ number: Int32, all: Bool = false, revoking: Bool = false) {
                guard var runner = workers[index].runners[number] else { return }
                let mayPush = workers[index].ownership.mayPush(number)
                while runner.position < logEnd[number, default: 0], all || generator.below(2) == 0 {
                    guard mayPush, !runner.quiesced else { break }
                    if runner.position < snapshotted[number, default: 0] {
                        runner.completed.insert(runner.position)
                        runner.position += 1
                        continue
                    }
                    if revoking { violations.append("worker \(index): partition \(number) pushed after its revocation") }
                    runner.inFlight.insert(runner.position)
                    if pushed[number, default: []].contains(runner.position) { duplicates += 1 }
                    pushed[number, default: []].insert(runner.position)
                    pushedRecords += 1
                    runner.position += 1
                }
                for offset in runner.inFlight.sorted() where all || generator.below(2) == 0 {
                    runner.inFlight.remove(offset)
                    runner.completed.insert(offset)
                }
                workers[index].runners[number] = runner
                fold(index, number)
    }

    private mutating func fold(_ index: Int, _ number: Int32) {
        guard var runner = workers[index].runners[number] else { return }
        while runner.completed.remove(runner.done) != nil { runner.done += 1 }
        workers[index].runners[number] = runner
        snapshotted[number] = max(snapshotted[number, default: 0], runner.done)
    }

    private mutating func completeRestores() {
        for index in workers.indices where workers[index].alive {
            for number in workers[index].ownership.partitions(in: .restoring) where generator.below(2) == 0 {
                apply(index, workers[index].ownership.restored(number, now: now))
            }
        }
    }

    private mutating func autoCommit() {
        for index in workers.indices where workers[index].alive {
            for (number, runner) in workers[index].runners where workers[index].ownership.phase(of: number) != nil && !runner.lingered {
                commit(number, runner.done)
            }
        }
    }

    private mutating func commit(_ number: Int32, _ offset: Int64) {
        if offset < committed[number, default: 0] {
            violations.append("partition \(number): commit went back from \(committed[number, default: 0]) to \(offset)")
        }
        committed[number] = max(committed[number, default: 0], offset)
    }

    /// Performs a worker's actions as the dispatcher does.
    private mutating func apply(_ index: Int, _ actions: [PartitionOwnership.Action]) {
        for action in actions {
            switch action {
            case .take(let number):
                let from = committed[number, default: 0]
                let unpushed = (0..<from).filter { !(pushed[number]?.contains($0) ?? false) }
                if !unpushed.isEmpty { violations.append("partition \(number): taken at \(from) with \(unpushed.prefix(3)) never pushed") }
                workers[index].runners[number] = Runner(position: from, done: from)
            case .resume, .restore:
                break
            case .linger(let number):
                workers[index].runners[number]?.lingered = true
            case .mark(let number, let mark):
                marks[number] = mark
            case .quiesce(let number):
                workers[index].runners[number]?.quiesced = true
            case .release(let number, let shouldCommit):
                fold(index, number)
                if shouldCommit, let runner = workers[index].runners[number], !runner.lingered { commit(number, runner.done) }
                workers[index].runners[number] = nil
            case .observe:
                break
            }
        }
    }

    /// The revocation handler: runs until every revoked partition is released.
    private mutating func revoke(_ index: Int, _ numbers: [Int32], lost: Bool) {
        apply(index, workers[index].ownership.revoked(numbers, lost: lost, now: now))
        var rounds = 0
        while !workers[index].ownership.partitions(in: .releasing).isEmpty {
            rounds += 1
            now = now + 0.05
            for number in workers[index].ownership.partitions(in: .releasing) {
                // Records already taken in still reach the runner meanwhile.
                progress(index, number, revoking: true)
                answerSome(index, number, oneIn: 4)
            }
            apply(index, workers[index].ownership.timerFired(now: now))
            if rounds > 100 { violations.append("worker \(index): release never finished"); return }
        }
        for number in numbers where workers[index].runners[number] != nil && workers[index].ownership.phase(of: number) != .lingering {
            violations.append("worker \(index): partition \(number) still held after its revocation returned")
        }
    }

    /// A cooperative rebalance over the live workers: round-robin target,
    /// moved partitions revoked from their owners (each revocation returns
    /// before the partition is assigned elsewhere), then assigned.
    private mutating func rebalance() {
        let alive = workers.indices.filter { workers[$0].isMember }
        guard !alive.isEmpty else { return }
        var target: [Int32: Int] = [:]
        for number in 0..<partitions { target[number] = alive[Int(number) % alive.count] }
        var revocations: [Int: [Int32]] = [:]
        for (number, owner) in assignment where target[number] != owner && workers[owner].alive {
            revocations[owner, default: []].append(number)
        }
        for (owner, numbers) in revocations.sorted(by: { $0.key < $1.key }) { revoke(owner, numbers, lost: false) }
        var assignments: [Int: [Int32]] = [:]
        for (number, owner) in target where assignment[number] != owner { assignments[owner, default: []].append(number) }
        assignment = target
        for (owner, numbers) in assignments.sorted(by: { $0.key < $1.key }) {
            apply(owner, workers[owner].ownership.assigned(numbers.sorted(), now: now))
        }
    }

    private mutating func leave(_ index: Int, crash: Bool) {
        if !crash, workers[index].ownership.configuration.lingerTimeout > 0 {
            // SIGTERM with others in the group: the consumer's close revokes
            // everything, which lingers until claimed.
            revoke(index, workers[index].ownership.held, lost: false)
            workers[index].leaving = true
            rebalance()
            return
        }
        if !crash {
            apply(index, workers[index].ownership.leave(now: now))
            // SIGTERM: the consumer's close revokes everything it holds.
            revoke(index, workers[index].ownership.held, lost: false)
        }
        workers[index].alive = false
        workers[index].runners = [:]
        now = now + (crash ? 10 : 0)
        rebalance()
    }

    private mutating func loseAssignment(_ index: Int) {
        revoke(index, workers[index].ownership.held, lost: true)
        // The group moved on without it; it rejoins in the next rebalance.
        for (number, owner) in assignment where owner == index { assignment[number] = nil }
        rebalance()
    }

    /// Workers read the marks of the partitions waiting for one, some of them.
    private mutating func readMarks() {
        for index in workers.indices where workers[index].alive {
            for number in workers[index].ownership.awaitingMarks where generator.below(2) == 0 {
                apply(index, workers[index].ownership.markRead(number, marks[number] ?? .released, now: now))
            }
        }
    }

    /// Each worker's timer, and the releases that run outside a revocation
    /// (lingered partitions): some answers arrive, and a partition with
    /// nothing under way is settled.
    private mutating func timers() {
        for index in workers.indices where workers[index].alive {
            apply(index, workers[index].ownership.timerFired(now: now))
            for number in workers[index].ownership.partitions(in: .releasing) { answerSome(index, number, oneIn: 3) }
        }
    }

    /// Answers arrive for about one in `oneIn` of a releasing partition's
    /// sends under way; with none left, it is settled.
    private mutating func answerSome(_ index: Int, _ number: Int32, oneIn: Int) {
        guard var runner = workers[index].runners[number] else { return }
        for offset in runner.inFlight.sorted() where generator.below(oneIn) == 0 {
            runner.inFlight.remove(offset)
            runner.completed.insert(offset)
        }
        workers[index].runners[number] = runner
        fold(index, number)
        if runner.inFlight.isEmpty { apply(index, workers[index].ownership.settled(number, now: now)) }
    }

    private mutating func checkSinglePusher() {
        for number in 0..<partitions {
            let pushers = workers.indices.filter { workers[$0].alive && workers[$0].ownership.mayPush(number) }
            if pushers.count > 1 { violations.append("partition \(number): workers \(pushers) may push at once") }
            for index in workers.indices where workers[index].alive && workers[index].ownership.mayPush(number) {
                if assignment[number] != index, workers[index].ownership.phase(of: number) != .lingering { violations.append("partition \(number): worker \(index) may push without the assignment") }
            }
        }
    }
}
