import LiveDispatchCore

/// How the dispatcher stops, driven by its consumer stage: ``drain()``
/// before the group consumer closes, ``awaitHandOvers()`` after. The
/// decisions (leaving, each partition's release) stay the
/// ``DispatchStage`` machine's; this waits on the dispatcher's change
/// signal, within the shutdown's bounds, for what they start to end.
struct DispatchShutdown {
    let dispatcher: Dispatcher

    private var configuration: WorkerConfiguration { dispatcher.configuration }

    /// When other workers will take the partitions over (and partitions
    /// linger at all): nothing to do before the consumer closes, which
    /// revokes each partition; each lingers until the worker taking it over
    /// claims it (``awaitHandOvers()``). When this worker holds every
    /// `commands` partition (the group's only member), nobody would claim
    /// them: it pushes what is held at once and waits, within
    /// `shutdown.timeout`, for every partition to be idle; then the
    /// consumer closes, which releases each partition at once.
    func drain() async {
        let held = dispatcher.state.withLock { state in
            state.machine.drain()
            return state.machine.held.count
        }
        if configuration.shutdown.lingerTimeout > 0, await othersMayTakeOver(held: held) {
            dispatcher.logger.info("Stopping; each partition is pushed until the worker taking it over claims it")
            return
        }
        dispatcher.pauses.withLock { _ in dispatcher.decide { machine, now in machine.leave(now: now) } }
        // From here each runner signals the change signal when an input leaves it idle.
        dispatcher.services.reportsIdleNow.store(true, ordering: .relaxed)
        for runner in dispatcher.runners { runner.apply { machine, now in machine.drain(now: now) } }
        let deadline = ContinuousClock.now + .seconds(configuration.shutdown.timeout)
        while !Task.isCancelled {
            let seen = dispatcher.changes.generation
            if dispatcher.runners.allSatisfy(\.isIdle), dispatcher.state.withLock({ $0.machine.partitions(in: .releasing).isEmpty }) {
                dispatcher.logger.info("Dispatcher drained")
                return
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            await dispatcher.changes.wait(after: seen, timeout: left)
        }
        dispatcher.logger.warning(
            "Shutdown timeout reached with work in flight; it is re-delivered to the next owner",
            metadata: ["shutdown.timeout": "\(configuration.shutdown.timeout)"])
    }

    /// Whether other members may take `held` partitions of `commands` over:
    /// not when this worker holds them all; yes when the counts cannot be read.
    private func othersMayTakeOver(held: Int) async -> Bool {
        await dispatcher.kafka.othersMayTakeOver([configuration.topic(.commands)], held: held, configuration: dispatcher.client, logger: dispatcher.logger)
    }

    /// After the consumer closed: the partitions it let linger are pushed
    /// on until their new owners claim them, then released; this waits for
    /// that, at most until their linger deadline and release timeout have
    /// passed, and for every decision's I/O under way to end.
    func awaitHandOvers() async {
        let linger = min(max(0, configuration.shutdown.lingerTimeout), PartitionOwnership.longestLinger)
        let bound = linger + max(0, configuration.shutdown.releaseTimeout) + 1
        let deadline = ContinuousClock.now + .seconds(bound)
        while !Task.isCancelled {
            let seen = dispatcher.changes.generation
            if dispatcher.state.withLock({ $0.machine.held.isEmpty }), dispatcher.handOversUnderWay.load(ordering: .sequentiallyConsistent) == 0 {
                return
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            await dispatcher.changes.wait(after: seen, timeout: left)
        }
        dispatcher.logger.warning("Partitions still held at the end of the shutdown; their next owners redo what they had not finished", metadata: [
            "kafka.partitions": "\(dispatcher.state.withLock { $0.machine.held })",
        ])
    }
}
