import Kafka
import LiveDispatchCore

/// The dispatcher's waits on hand-overs, which only Kafka and the clock
/// end: the revocation handler blocking until the partitions it releases
/// settle, the marks read while a partition waits for one (the other
/// worker's progress), and the releases finished as their sends are
/// answered and the deadlines acted on as the timer fires. What each
/// read, settle or deadline means is decided by the ``DispatchStage``
/// machine, through ``Dispatcher/decide(_:)``.
///
/// The group rebalances cooperatively: a scale event revokes only the
/// partitions that move. A partition a rebalance revokes lingers: the
/// follower reads its commands and it pushes on until its next owner
/// claims it, through the partition's ``HandOverMark``; a new owner waits
/// for that mark to say released before it restores. Two workers never
/// push one partition at once.
struct HandOverWatch {
    let dispatcher: Dispatcher

    /// How often the marks are read while a partition waits for one: the
    /// other worker's progress, which only Kafka tells.
    static let markReadInterval = Duration.milliseconds(50)

    private var changes: ChangeSignal { dispatcher.changes }

    /// The revocation handler, on the group consumer's poll thread. A
    /// partition revoked by a rebalance lingers, marked so before the
    /// revocation returns (and the group can assign it elsewhere). Any
    /// other is released before the consumer commits and unassigns it,
    /// waiting (within `shutdown.release_timeout`) for the sends and writes
    /// under way in those it owned: it blocks on the change signal until a
    /// revoked partition settles or the machine's next deadline.
    func revoking(_ partitions: [TopicPartition], lost: Bool) {
        let numbers = partitions.filter { $0.topic == dispatcher.configuration.topic(.commands) }.map(\.partition)
        dispatcher.decide { machine, now in machine.revoked(numbers, lost: lost, now: now) }
        while true {
            let seen = changes.generation
            guard dispatcher.state.withLock({ $0.machine.partitions(in: .releasing) }).contains(where: numbers.contains) else { return }
            if settleReleasing(among: numbers) { continue }
            changes.blockingWait(after: seen, timeout: untilNextDeadline())
        }
    }

    /// How long until the machine's next deadline; nil when it has none.
    private func untilNextDeadline() -> Duration? {
        guard let next = dispatcher.state.withLock({ $0.machine.nextDeadline }) else { return nil }
        return .seconds(max(0, next - dispatcher.clock()))
    }

    /// Reads the marks of the partitions waiting for one (a taken
    /// partition's previous owner, a lingering partition's claim) every
    /// ``markReadInterval`` while there are any, and waits for the change
    /// signal while there are none; beside it, finishes the releases as
    /// their sends are answered and acts on each deadline when the timer
    /// armed at it fires. The two run apart so a slow broker never delays
    /// a deadline.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await readMarks() }
            group.addTask {
                while !Task.isCancelled {
                    let seen = changes.generation
                    settleReleasing()
                    await changes.wait(after: seen, timeout: nil)
                }
            }
        }
    }

    private func readMarks() async {
        while !Task.isCancelled {
            let seen = changes.generation
            let awaiting = dispatcher.state.withLock { $0.machine.awaitingMarks }
            guard !awaiting.isEmpty else {
                // No hand-over under way: nothing to read until a decision makes one.
                await changes.wait(after: seen, timeout: nil)
                continue
            }
            do {
                let marks = try await dispatcher.follower.marks(of: awaiting)
                dispatcher.decide { machine, now in awaiting.flatMap { machine.markRead($0, marks[$0] ?? .released, now: now) } }
            } catch {
                dispatcher.logger.warning("Reading hand-over marks failed; retrying", metadata: ["kafka.partitions": "\(awaiting)", "kafka.error": "\(error)"])
            }
            try? await Task.sleep(for: Self.markReadInterval)
        }
    }

    /// Releases the releasing partitions (of `numbers`, when given) with no
    /// send or write under way any more, and acts on every deadline passed;
    /// whether the machine decided anything.
    @discardableResult
    private func settleReleasing(among numbers: [Int32]? = nil) -> Bool {
        let settled = dispatcher.state.withLock { state in
            state.machine.partitions(in: .releasing).filter { numbers?.contains($0) ?? true }.filter { state.runners[$0]?.isSettled ?? true }
        }
        return dispatcher.decide { machine, now in settled.flatMap { machine.settled($0, now: now) } + machine.timerFired(now: now) }
    }
}
