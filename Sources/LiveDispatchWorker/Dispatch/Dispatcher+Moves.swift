import Foundation
import Kafka
import LiveDispatchCore
import NIOCore

/// How partitions move in and out of this worker: ``DispatchStage``
/// decides, these functions do the I/O (a new runner and its restore, the
/// co-partitions followed and let go, the linger, the marks, the release).
extension Dispatcher {
    /// Lets the machine decide and does what it says, counted in
    /// ``handOversUnderWay`` from before the decision to the end of the
    /// I/O (a partition the machine lets go is gone from it before its
    /// release and mark are written, and a worker stopping must not close
    /// the follower in between); re-arms the timer at the machine's next
    /// deadline. Whether the machine decided anything.
    @discardableResult
    func decide(_ body: (inout DispatchStage, UnixTime) -> [DispatchStage.Action]) -> Bool {
        handOversUnderWay.add(1, ordering: .sequentiallyConsistent)
        let (actions, released, cancel) = state.withLock { state in
            let now = clock()
            let actions = body(&state.machine, now)
            var released: [Int32: PartitionRunner] = [:]
            for case .release(let number, _, _, _) in actions {
                released[number] = state.runners.removeValue(forKey: number)
                remeasure(number, in: &state)
            }
            let cancel = state.timer.arm(at: state.machine.nextDeadline, now: now, on: eventLoops.next()) { [weak self] number in
                self?.deadlineReached(number)
            }
            return (actions, released, cancel)
        }
        cancel?.cancel()
        if !actions.isEmpty { perform(actions, released: released) }
        handOversUnderWay.subtract(1, ordering: .sequentiallyConsistent)
        // The shutdown waits for the count to be 0.
        if !actions.isEmpty { changes.signal() }
        return !actions.isEmpty
    }

    /// The machine's deadline came: the hand-over watch (or a revocation
    /// handler waiting) acts on it.
    private func deadlineReached(_ number: UInt64) {
        if state.withLock({ $0.timer.fired(number) }) { changes.signal() }
    }

    private func perform(_ actions: [DispatchStage.Action], released: [Int32: PartitionRunner]) {
        // Released partitions are let go together: one commit of what they finished.
        var releases: [(number: Int32, commit: Bool, unfollow: Bool, lingered: Bool)] = []
        for case .release(let number, let commit, let unfollow, let lingered) in actions { releases.append((number, commit, unfollow, lingered)) }
        if !releases.isEmpty { release(releases, runners: released) }
        for action in actions {
            switch action {
            case .take(let number):
                take(number)
            case .restore(let number):
                // No runner yet: the take installing it starts the restore.
                if let runner = runner(number) { startRestore(runner) }
            case .linger(let number):
                guard let runner = runner(number) else { break }
                runner.linger()
                follower.linger(number, from: runner.nextCommandOffset.load(ordering: .relaxed))
            case .mark(let number, let mark):
                follower.write(mark, of: number)
            case .quiesce(let number):
                runner(number)?.quiesce()
            case .release:
                break
            case .pause(let numbers):
                do { try pause(numbers) } catch { logger.warning("Pausing partitions failed", metadata: ["kafka.partitions": "\(numbers)", "kafka.error": "\(error)"]) }
            case .resume(let numbers):
                do { try resume(numbers) } catch { logger.warning("Resuming partitions failed", metadata: ["kafka.partitions": "\(numbers)", "kafka.error": "\(error)"]) }
            case .setSendLimit(let number, let share):
                runner(number)?.apply { machine, now in machine.setSendLimit(share, now: now) }
            case .observe(let observation):
                reporter.observe(observation)
            }
        }
        reportPartitions()
    }

    /// Lets partitions go: their runners close (taking their records in
    /// progress out of the count), then the follower commits what they
    /// finished (once) and stops reading what it read for them.
    func release(_ releases: [(number: Int32, commit: Bool, unfollow: Bool, lingered: Bool)], runners: [Int32: PartitionRunner]) {
        for runner in runners.values { runner.close() }
        follower.release(
            releases.map(\.number), commit: releases.contains(where: \.commit),
            unfollowed: releases.filter(\.unfollow).map(\.number), lingered: releases.filter(\.lingered).map(\.number))
    }

    func commandsPartition(_ number: Int32) -> TopicPartition { follower.commands(number) }

    func take(_ number: Int32) {
        let runner = PartitionRunner(number: number, configuration: configuration.partitionDispatcher, eventLoop: eventLoops.next(), port: services)
        // Paused before the runner is installed: its restore, which may
        // start as soon as it is, resumes it at the end.
        do { try pause([number]) } catch { logger.warning("Pausing a partition for its restore failed", metadata: ["kafka.error": "\(error)"]) }
        // A revocation decided meanwhile either finds this runner and
        // releases it, or has released the partition already and it is not
        // installed. The mark may have been read already: then the restore starts here.
        let installed: (Bool, PartitionRunner?, cleared: Bool) = state.withLock { state in
            guard state.machine.phase(of: number) == .restoring else { return (false, nil, false) }
            defer { state.runners[number] = runner }
            return (true, state.runners[number], state.machine.mayRestore(number))
        }
        installed.1?.close()
        guard installed.0 else {
            runner.close()
            return
        }
        logger.info("Partition assigned; reading its hand-over mark", metadata: ["kafka.partition": "\(number)"])
        if installed.cleared { startRestore(runner) }
    }

    /// Starts the runner's restore, once: the mark's reader and the take may both find it due.
    func startRestore(_ runner: PartitionRunner) {
        guard runner.claimRestore() else { return }
        stage.schedule { [self] in await ChangelogRestore(dispatcher: self, runner: runner).run() }
    }

    // MARK: The events of the runners the machine follows (through ``PartitionServices``)

    /// The records in progress over all partitions moved to `total`: the
    /// machine's gate decides, and its pause or resume is done before
    /// another decision of the gate is taken.
    func outstandingMoved(_ total: Int) {
        pauses.withLock { _ in decide { machine, _ in machine.outstandingMoved(to: total) } }
    }

    func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand) {
        decide { machine, _ in machine.demandChanged(number, demand) }
    }

    func caughtUp(_ number: Int32) {
        pauses.withLock { _ in decide { machine, _ in machine.caughtUp(number) } }
    }

    /// Stops fetching the partitions' commands, tokens and starts.
    func pause(_ numbers: [Int32]) throws(KafkaError) {
        try consumer.pause(numbers.map(commandsPartition))
        try follower.consumer.pause(numbers.flatMap(follower.copartitions))
    }

    func resume(_ numbers: [Int32]) throws(KafkaError) {
        try consumer.resume(numbers.map(commandsPartition))
        try follower.consumer.resume(numbers.flatMap(follower.copartitions))
    }

}
