import Foundation
import Kafka
import LiveDispatchCore

/// How partitions move in and out of this worker: ``PartitionOwnership``
/// decides, these functions do the I/O (a new runner and its restore, the
/// co-partitions followed and let go, the linger, the marks, the release).
extension Dispatcher {
    func perform(_ actions: [PartitionOwnership.Action]) {
        // Released partitions are let go together: one commit of what they finished.
        let releases = actions.compactMap { action -> (number: Int32, commit: Bool)? in
            if case .release(let number, let commit) = action { return (number, commit) }
            return nil
        }
        if !releases.isEmpty { release(releases) }
        for action in actions {
            switch action {
            case .take(let number):
                take(number)
            case .restore(let number):
                // No runner yet: the take installing it starts the restore.
                if let runner = runner(number) { startRestore(runner) }
            case .resume(let number):
                resumeRestored(number)
            case .linger(let number):
                linger(number)
            case .mark(let number, let mark):
                write(mark, of: number)
            case .quiesce(let number):
                runner(number)?.quiesce()
            case .release:
                break
            case .observe(let observation):
                observe(observation)
            }
        }
        reportPartitions()
        if !actions.isEmpty { changes.signal() }
    }

    private func observe(_ observation: PartitionOwnership.Observation) {
        metrics.handover(observation)
        switch observation {
        case .takenOver(let number, let seconds):
            logger.info("Partition taken over", metadata: ["kafka.partition": "\(number)", "handover.seconds": "\(String(format: "%.3f", seconds))"])
        case .waitedForRelease(let number, let seconds, let released):
            logger.info(released ? "Previous owner released the partition" : "Previous owner's deadline passed; taking the partition", metadata: [
                "kafka.partition": "\(number)", "handover.wait_seconds": "\(String(format: "%.3f", seconds))",
            ])
        case .lingered(let number, let seconds, let claimed):
            logger.info(claimed ? "Lingering partition claimed by its next owner" : "Lingering partition's deadline passed", metadata: [
                "kafka.partition": "\(number)", "handover.linger_seconds": "\(String(format: "%.3f", seconds))",
            ])
        case .released(let number, let seconds, let settled):
            logger.info("Partition released", metadata: [
                "kafka.partition": "\(number)", "handover.seconds": "\(String(format: "%.3f", seconds))", "handover.settled": "\(settled)",
            ])
        }
    }

    /// The revocation handler, on the group consumer's poll thread. A
    /// partition revoked by a rebalance lingers: its commands are read on
    /// the follower from where its machine stands, and it is marked so
    /// before the revocation returns (and the group can assign it
    /// elsewhere). Any other is released before the consumer commits and
    /// unassigns it, waiting (within `shutdown.release_timeout`) for the
    /// sends and writes under way in those it owned: it blocks on
    /// ``changes`` (signalled when a revoked partition settles) until then,
    /// or until the machine's next deadline (the release timeout).
    func revoking(_ partitions: [TopicPartition], lost: Bool) {
        let numbers = partitions.filter { $0.topic == configuration.topic(.commands) }.map(\.partition)
        perform(ownership.withLock { $0.revoked(numbers, lost: lost, now: clock()) })
        while true {
            let seen = changes.generation
            guard ownership.withLock({ $0.partitions(in: .releasing) }).contains(where: numbers.contains) else { return }
            if settleReleasing(among: numbers) { continue }
            changes.blockingWait(after: seen, timeout: untilNextDeadline())
        }
    }

    /// How long until the machine's next deadline; nil when it has none.
    func untilNextDeadline() -> Duration? {
        guard let next = ownership.withLock(\.nextDeadline) else { return nil }
        return .seconds(max(0, next - clock()))
    }

    /// Lets partitions go: their machines close (taking their records in
    /// progress out of the count), what they finished is committed (once,
    /// unless every assignment was lost), and their co-partitions are no
    /// longer read.
    func release(_ releases: [(number: Int32, commit: Bool)]) {
        let numbers = releases.map(\.number)
        for number in numbers {
            let runner = ownership.withLock { _ in table.withLock { $0.runners.removeValue(forKey: number) } }
            runner?.close()
            gate.withLock { $0.released(number) }
        }
        if releases.contains(where: \.commit) {
            do { try follower.commitBlocking() } catch {
                logger.warning("Committing released partitions' tokens and starts failed; the next owner reads them again", metadata: [
                    "kafka.partitions": "\(numbers)", "kafka.error": "\(error)",
                ])
            }
        }
        let lingered = lingering.withLock { lingering in numbers.filter { lingering.remove($0) != nil } }
        followed.withLock { followed in
            followed.subtract(numbers)
            do { try follower.unassign(numbers.flatMap(followerPartitions) + lingered.map(commandsPartition)) } catch {
                logger.warning("Unassigning released partitions' tokens and starts failed", metadata: ["kafka.partitions": "\(numbers)", "kafka.error": "\(error)"])
            }
        }
    }

    /// Starts reading the partition's tokens and starts from where the
    /// group left them (paused until its restore ends). A partition never
    /// followed before reads from the offsets the group committed for them
    /// when it still consumed them itself, else from the beginning.
    /// Returns the offsets it reads them from (none: the beginning).
    func follow(_ runner: PartitionRunner) async throws(KafkaError) -> [TopicPartition: Int64] {
        let partitions = followerPartitions(runner.number)
        var offsets = try await follower.committedOffsets(for: partitions)
        let missing = partitions.filter { offsets[$0] == nil }
        if !missing.isEmpty {
            offsets.merge(try await consumer.committedOffsets(for: missing)) { followed, _ in followed }
        }
        try followed.withLock { followed throws(KafkaError) in
            guard !runner.isClosed else { return }
            try follower.assign(partitions, offsets: offsets)
            try follower.pause(partitions)
            followed.insert(runner.number)
        }
        return offsets
    }

    func commandsPartition(_ number: Int32) -> TopicPartition {
        TopicPartition(topic: configuration.topic(.commands), partition: number)
    }

    /// Reads a revoked partition's commands on the follower, from the
    /// offset after the last one its machine took in (else from the
    /// group's commit): the partition pushes on until it is claimed.
    func linger(_ number: Int32) {
        guard let runner = runner(number) else { return }
        let partition = commandsPartition(number)
        do {
            var next = runner.nextCommandOffset.load(ordering: .relaxed)
            if next < 0 { next = try consumer.committedOffsetsBlocking(for: [partition], timeout: .seconds(5))[partition] ?? 0 }
            lingering.withLock { _ = $0.insert(number) }
            try follower.assign([partition], offsets: [partition: next])
            logger.info("Partition revoked; pushing it until its next owner claims it", metadata: ["kafka.partition": "\(number)", "kafka.offset": "\(next)"])
        } catch {
            // Its records stop here; the next owner reads them again.
            logger.warning("Reading a lingering partition's commands failed; it pushes only what it holds", metadata: [
                "kafka.partition": "\(number)", "kafka.error": "\(error)",
            ])
        }
    }

    /// Writes the partition's ``HandOverMark``, waiting for the broker: a
    /// lingering mark is in place before the revocation returns, a released
    /// one after the release's commit.
    func write(_ mark: HandOverMark, of number: Int32) {
        do { try follower.commitBlocking([KafkaCommitOffset(topicPartition: commandsPartition(number), offset: mark.offset)]) } catch {
            logger.warning("Writing a partition's hand-over mark failed; the other owner waits for the deadline instead", metadata: [
                "kafka.partition": "\(number)", "handover.mark": "\(mark)", "kafka.error": "\(error)",
            ])
        }
    }

    /// Reads the marks of the partitions waiting for one (a taken
    /// partition's previous owner, a lingering partition's claim) every
    /// 50 ms while there are any (the other worker's progress, in Kafka),
    /// and waits for ``changes`` while there are none; beside it, finishes
    /// the releases of lingered partitions as their sends are answered and
    /// acts on each deadline as it passes (woken by ``changes``, or at the
    /// machine's next deadline). The two run apart so a slow broker never
    /// delays a deadline: a lingering partition stops on time on this
    /// worker's clock, which is what its next owner counts on.
    func watchHandOvers() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.readMarks() }
            group.addTask { await self.keepDeadlines() }
        }
    }

    private func readMarks() async {
        while !Task.isCancelled {
            let seen = changes.generation
            let awaiting = ownership.withLock(\.awaitingMarks)
            guard !awaiting.isEmpty else {
                // No hand-over under way: nothing to read until a decision makes one.
                await changes.wait(after: seen, timeout: nil)
                continue
            }
            do {
                let marks = try await follower.committedOffsets(for: awaiting.map(commandsPartition), timeout: .seconds(2))
                decide { ownership, now in
                    awaiting.flatMap { ownership.markRead($0, HandOverMark(offset: marks[commandsPartition($0)]), now: now) }
                }
            } catch {
                logger.warning("Reading hand-over marks failed; retrying", metadata: ["kafka.partitions": "\(awaiting)", "kafka.error": "\(error)"])
            }
            try? await Task.sleep(for: Self.markReadInterval)
        }
    }

    /// How often the marks are read while a partition waits for one: the
    /// other worker's progress, which only Kafka tells.
    static let markReadInterval = Duration.milliseconds(50)

    private func keepDeadlines() async {
        while !Task.isCancelled {
            let seen = changes.generation
            settleReleasing()
            await changes.wait(after: seen, timeout: untilNextDeadline())
        }
    }

    /// Releases the releasing partitions (of `numbers`, when given) with no
    /// send or write under way any more, and acts on every deadline passed;
    /// whether the machine decided anything.
    @discardableResult
    private func settleReleasing(among numbers: [Int32]? = nil) -> Bool {
        let releasing = ownership.withLock { $0.partitions(in: .releasing) }.filter { numbers?.contains($0) ?? true }
        let settled = releasing.filter { runner($0)?.isSettled ?? true }
        return decide { ownership, now in settled.flatMap { ownership.settled($0, now: now) } + ownership.timerFired(now: now) }
    }

    /// Lets the machine decide and does what it says, counted in
    /// ``handOversUnderWay`` from before the decision to the end of the
    /// I/O: a partition the machine lets go is gone from it before its
    /// release and mark are written, and a worker stopping must not close
    /// the follower in between.
    @discardableResult
    private func decide(_ body: (inout PartitionOwnership, UnixTime) -> [PartitionOwnership.Action]) -> Bool {
        handOversUnderWay.add(1, ordering: .sequentiallyConsistent)
        let actions = ownership.withLock { body(&$0, clock()) }
        if !actions.isEmpty { perform(actions) }
        handOversUnderWay.subtract(1, ordering: .sequentiallyConsistent)
        // The shutdown waits for the count to be 0.
        if !actions.isEmpty { changes.signal() }
        return !actions.isEmpty
    }

    func take(_ number: Int32) {
        let runner = PartitionRunner(
            number: number, configuration: configuration.partitionDispatcher, eventLoop: eventLoops.next(),
            services: services)
        // Paused before the runner is installed: its restore, which may
        // start as soon as it is, resumes it at the end.
        do { try pause([number]) } catch { logger.warning("Pausing a partition for its restore failed", metadata: ["kafka.error": "\(error)"]) }
        // Under the ownership lock (then the table's): a revocation handled
        // on the poll thread meanwhile either finds this runner and releases
        // it, or has released the partition already and it is not installed.
        // The mark may have been read already (the machine holds the
        // partition from the assignment on, before this runs): then the
        // restore starts here.
        let installed: (Bool, PartitionRunner?, cleared: Bool) = ownership.withLock { ownership in
            guard ownership.phase(of: number) == .restoring else { return (false, nil, false) }
            let previous = table.withLock { table in
                defer { table.runners[number] = runner }
                return table.runners[number]
            }
            return (true, previous, ownership.mayRestore(number))
        }
        installed.1?.close()
        guard installed.0 else {
            runner.close()
            return
        }
        logger.info("Partition assigned; reading its hand-over mark", metadata: ["kafka.partition": "\(number)"])
        if installed.cleared { startRestore(runner) }
    }

    /// Starts the runner's restore, once: the mark's reader and the take
    /// may both find it due.
    func startRestore(_ runner: PartitionRunner) {
        guard runner.claimRestore() else { return }
        stage.schedule { [self] in await restore(runner) }
    }

    /// A restored partition's records flow, unless back-pressure holds the
    /// worker's partitions: one catching up reads on while others are
    /// paused, as its held pushes wait for the end of its replay.
    func resumeRestored(_ number: Int32) {
        guard let runner = runner(number) else { return }
        gate.withLock { gate in
            guard !gate.isPaused || runner.isCatchingUp else { return }
            gate.released(number)
            try? resume([number])
        }
    }

    func followerPartitions(_ number: Int32) -> [TopicPartition] {
        [.tokens, .starts].map { TopicPartition(topic: configuration.topic($0), partition: number) }
    }

    /// Stops fetching the partitions' commands, tokens and starts.
    func pause(_ numbers: [Int32]) throws(KafkaError) {
        try consumer.pause(numbers.map { TopicPartition(topic: configuration.topic(.commands), partition: $0) })
        try follower.pause(numbers.flatMap(followerPartitions))
    }

    func resume(_ numbers: [Int32]) throws(KafkaError) {
        try consumer.resume(numbers.map { TopicPartition(topic: configuration.topic(.commands), partition: $0) })
        try follower.resume(numbers.flatMap(followerPartitions))
    }

    /// Reads the partition's `state` and `token-store` changelogs to their end, then lets its records flow.
    func restore(_ runner: PartitionRunner) async {
        let number = runner.number
        let started = ContinuousClock.now
        var attempt = 0
        // A stage shutting down cancels its jobs: a restore still under way stops.
        while !runner.isClosed, !Task.isCancelled {
            do {
                let registrations = TopicPartition(topic: configuration.topic(.tokens), partition: number)
                let tokensFrom = try await follow(runner)[registrations] ?? 0
                let followed = ContinuousClock.now
                let (restoredStates, restoredTokens) = try await readChangelogs(runner, registrations: registrations, tokensFrom: tokensFrom)
                let read = ContinuousClock.now
                guard runner.finishRestore() else { return }
                perform(ownership.withLock { $0.restored(number, now: clock()) })
                // The last restore done: the records it fetched are free.
                if reportPartitions() == 0 { MallocTuning.releaseFreeMemory() }
                logger.info("Partition restored", metadata: [
                    "kafka.partition": "\(number)", "restore.states": "\(restoredStates)", "restore.tokens": "\(restoredTokens)",
                    "restore.seconds": "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                    "restore.install_seconds": "\(String(format: "%.3f", (ContinuousClock.now - read).seconds))",
                    "restore.follow_seconds": "\(String(format: "%.3f", (followed - started).seconds))",
                ])
                return
            } catch {
                attempt += 1
                logger.error("Restoring a partition failed; retrying", metadata: ["kafka.partition": "\(number)", "kafka.error": "\(error)", "restore.attempt": "\(attempt)"])
                try? await Task.sleep(for: .seconds(Backoff.partitionRestore.ceiling(attempt: attempt)))
            }
        }
    }

    /// Reads the partition's `state` and `token-store` changelogs into its
    /// machine (registrations a batch under one lock take, snapshots once
    /// the changelog is read) and the ends of its `commands` and `tokens`
    /// now, all on one client; returns the records read. The
    /// previous owner may have pushed any state of the commands up to the
    /// partition's end now, to the tokens registered up to the end of
    /// `tokens`: pushes are held until both are read.
    private func readChangelogs(
        _ runner: PartitionRunner, registrations: TopicPartition, tokensFrom: Int64
    ) async throws -> (states: Int, tokens: Int) {
        let number = runner.number
        let states = TopicPartition(topic: configuration.topic(.state), partition: number)
        let tokenStore = TopicPartition(topic: configuration.topic(.tokenStore), partition: number)
        let commands = commandsPartition(number)
        var ends: [TopicPartition: Int64] = [:]
        var read = (states: 0, tokens: 0)
        // Only each activity's last snapshot is read and decoded: a
        // changelog's head is not compacted yet (Tansu never compacts), and
        // an activity pushed a thousand times has a thousand snapshots there.
        try await reader.read([states: .latestPerKey, tokenStore: .records, commands: .endOffset, registrations: .endOffset]) { event in
            switch event {
            case .records(let partition, let records) where partition == states:
                runner.restoring { machine in
                    for record in records { machine.restoreState(key: String(decoding: record.key ?? [], as: UTF8.self), value: record.value) }
                }
                read.states += records.count
            case .records(_, let records):
                runner.restoring { machine in
                    for record in records { machine.restoreToken(key: record.key ?? [], value: record.value) }
                }
                read.tokens += records.count
            case .caughtUp(let partition, let end):
                ends[partition] = end
                guard partition == commands || partition == registrations,
                      let commandsEnd = ends[commands], let registrationsEnd = ends[registrations]
                else { return }
                let unread = registrationsEnd > tokensFrom ? registrationsEnd : nil
                runner.restoring { $0.holdPushes(untilCommandOffset: commandsEnd, tokenOffset: unread) }
            }
        }
        return read
    }
}
