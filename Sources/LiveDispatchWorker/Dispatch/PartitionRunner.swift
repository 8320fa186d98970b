import APNs
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import NIOCore
import Synchronization

/// The owner of one partition's ``PartitionDispatcher``: it feeds the
/// machine its inputs under the partition's own lock (never a lock shared
/// with other partitions), keeps one wake-up armed at the machine's
/// ``PartitionDispatcher/nextDeadline``, and performs the actions after the
/// lock is released.
///
/// No task is started per update, send or acknowledgement: sends of one
/// input go to the APNs pool as one batch; outcomes and Kafka
/// acknowledgements arrive on other threads into an inbox, and one job on
/// the partition's event loop applies everything the inbox gathered under a
/// single lock take.
final class PartitionRunner: Sendable {
    /// Something that happened elsewhere, applied in the next drain.
    enum Arrival: Sendable {
        case sent(PartitionDispatcher.Send, FanOut.Outcome)
        case acknowledged(UInt64)
        case channel(BroadcastChannels.Report)
    }

    private struct Box: Sendable {
        var machine: PartitionDispatcher
        var closed = false
        /// Revoked: no new send or channel request starts and no timer is
        /// armed; answers and acknowledgements are still taken.
        var quiesced = false
        var timer = MachineTimer<Scheduled<Void>>()
        /// The demand last reported to the dispatcher, and whether a report is due.
        var reportedDemand = SendLimitShares.Demand(inFlight: 0, waiting: false)
        var demandReportScheduled = false
    }

    private struct Inbox: Sendable {
        var arrivals: [Arrival] = []
        var drainScheduled = false
    }

    let number: Int32
    let eventLoop: any EventLoop
    private let box: Mutex<Box>
    /// What health checks, scrapes and back-pressure read, kept beside the
    /// machine: they never wait for the partition's lock, which a large
    /// batch of completions holds for a while under load.
    private let restoringNow = Atomic<Bool>(true)
    private let restoreClaimed = Atomic<Bool>(false)
    private let sendsInFlightNow = Atomic<Int>(0)
    /// Read by back-pressure under its gate's lock, which must not wait for a partition's.
    private let catchingUpNow = Atomic<Bool>(false)
    /// Revoked (``quiesce()``): the dispatcher waits for it to settle.
    private let quiescedNow = Atomic<Bool>(false)
    /// Revoked and pushed on (``linger()``): its commands' offsets are not committed.
    private let lingers = Atomic<Bool>(false)
    /// The offset after the last command record handed to the partition
    /// (-1 before one): with the partition's end offset, the commands not
    /// read yet.
    let nextCommandOffset = Atomic<Int64>(-1)
    /// Sends handed to the pool and records handed to the producer whose
    /// answer has not been applied yet.
    private let unanswered = Atomic<Int>(0)
    private let inbox = Mutex(Inbox())
    /// The generation of the rules whose activity types the machine has (0: none yet).
    private let typesGeneration = Atomic<Int>(0)
    /// The dispatcher; weak, as it holds the runner.
    private weak let port: (any PartitionPort)?
    /// Records Kafka refused for now, waiting out their backoff.
    private let retries: RetryTimer

    init(number: Int32, configuration: PartitionDispatcher.Configuration, eventLoop: any EventLoop, port: any PartitionPort) {
        self.number = number
        self.eventLoop = eventLoop
        self.port = port
        self.retries = RetryTimer(eventLoop: eventLoop)
        self.box = Mutex(Box(machine: PartitionDispatcher(partition: number, configuration: configuration)))
    }

    var isRestoring: Bool { restoringNow.load(ordering: .relaxed) }
    var isClosed: Bool { box.withLock { $0.closed } }

    /// True for the first caller only: who starts the restore.
    func claimRestore() -> Bool {
        restoreClaimed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
    }
    /// Whether no send or write of this partition is waiting for its answer.
    var isSettled: Bool { unanswered.load(ordering: .relaxed) == 0 }
    var isIdle: Bool { box.withLock { $0.machine.isIdle } }
    var isCatchingUp: Bool { catchingUpNow.load(ordering: .relaxed) }
    var outstanding: Int { box.withLock { $0.machine.outstanding } }
    var sendsInFlight: Int { sendsInFlightNow.load(ordering: .relaxed) }
    var sendLimit: Int { box.withLock { $0.machine.sendLimit } }

    /// The activity's state as the machine holds it now; nil while the
    /// partition restores, once it is closed, or when the activity has none.
    func state(of activity: ActivityID) -> ActivityState? {
        guard !isRestoring else { return nil }
        return box.withLock { $0.closed ? nil : $0.machine.state(of: activity) }
    }

    /// What `body` reads of the machine, under the partition's lock (copy
    /// out only what the answer needs); nil while restoring or once closed.
    func read<Value>(_ body: (PartitionDispatcher) -> Value) -> Value? {
        guard !isRestoring else { return nil }
        return box.withLock { $0.closed ? nil : body($0.machine) }
    }

    /// The activity types of the rules in force when they are not the
    /// ones the machine has been given, for the next command's input to
    /// install (``PartitionDispatcher/useTypes(_:)``); nil when unchanged.
    func typesToFollow(_ rules: RuleSetStore) -> ActivityTypes? {
        let generation = rules.generation
        guard typesGeneration.exchange(generation, ordering: .relaxed) != generation else { return nil }
        return rules.current.types
    }

    /// Stops the partition: its timers are cancelled, later inputs and
    /// pending write retries are dropped, and the records it still had in progress leave the worker's
    /// count (under the lock every input's change is counted under, so no
    /// input's change is counted after them).
    func close() {
        let port = port
        let (timer, total): (Scheduled<Void>?, Int?) = box.withLock { box in
            guard !box.closed else { return (nil, nil) }
            box.closed = true
            let left = box.machine.outstanding
            return (box.timer.disarm(), left == 0 ? nil : port?.countOutstanding(-left))
        }
        timer?.cancel()
        retries.stop()
        if let total { port?.outstandingMoved(total) }
    }

    /// The group revoked the partition and it is pushed on until its next
    /// owner claims it: the offsets of its commands are the group's no more
    /// (the next owner reads the repeats as repeats).
    func linger() {
        lingers.store(true, ordering: .relaxed)
    }

    /// Stops starting sends, channel requests and timers, for a revoked
    /// partition: the sends and writes under way still complete, and what
    /// they finish is committed.
    func quiesce() {
        let timer: Scheduled<Void>? = box.withLock { box in
            box.quiesced = true
            return box.timer.disarm()
        }
        quiescedNow.store(true, ordering: .relaxed)
        timer?.cancel()
    }

    /// Feeds a changelog record of the restore; no actions come of it.
    func restoring(_ body: (inout PartitionDispatcher) -> Void) {
        box.withLock { box in
            guard !box.closed else { return }
            body(&box.machine)
            catchingUpNow.store(box.machine.isCatchingUp, ordering: .relaxed)
        }
    }

    /// Ends the restore; returns nil when the partition was closed
    /// meanwhile, else whether it is still catching up (reading its
    /// previous owner's commands).
    func finishRestore() -> Bool? {
        var finished = false
        applyLocked { box, now in
            finished = true
            restoringNow.store(false, ordering: .relaxed)
            return box.machine.finishRestore(now: now)
        }
        return finished ? isCatchingUp : nil
    }

    /// Feeds one input to the machine, performs its actions, and re-arms the timer.
    func apply(_ input: (inout PartitionDispatcher, UnixTime) -> [PartitionDispatcher.Action]) {
        applyLocked { box, now in input(&box.machine, now) }
    }

    private func applyLocked(_ input: (inout Box, UnixTime) -> [PartitionDispatcher.Action]) {
        guard let port else { return }
        let now = port.now
        var enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>] = [:]
        let outcome: (actions: [PartitionDispatcher.Action], total: Int?, cancel: Scheduled<Void>?, idle: Bool, caughtUp: Bool, reportDemand: Bool)? = box.withLock { box in
            guard !box.closed else { return nil }
            let before = box.machine.outstanding
            var actions = input(&box, now)
            if box.quiesced {
                // The next owner sends these: it redoes what was not committed.
                actions.removeAll { action in
                    switch action {
                    case .send, .channel: true
                    case .produce, .commit, .observe: false
                    }
                }
            }
            // Records are handed to the producer under the lock, so a
            // partition's snapshots, token changes and dead letters reach
            // Kafka in the order the machine decided them.
            for case .produce(let produce) in actions {
                enqueued[produce.ticket] = port.enqueue(produce, partition: number)
            }
            let cancel = box.quiesced
                ? nil
                : box.timer.arm(at: box.machine.nextDeadline, now: now, on: eventLoop) { [weak self] number in self?.timerFired(number) }
            sendsInFlightNow.store(box.machine.sendsInFlight, ordering: .relaxed)
            let caughtUp = catchingUpNow.load(ordering: .relaxed) && !box.machine.isCatchingUp && !restoringNow.load(ordering: .relaxed)
            catchingUpNow.store(box.machine.isCatchingUp, ordering: .relaxed)
            // Counted under the lock, so `close()` takes out exactly what is left.
            let delta = box.machine.outstanding - before
            let idle = port.reportsIdle && box.machine.isIdle
            let reportDemand = box.reportedDemand != box.machine.sendDemand && !box.demandReportScheduled
            if reportDemand { box.demandReportScheduled = true }
            return (actions, delta == 0 ? nil : port.countOutstanding(delta), cancel, idle, caughtUp, reportDemand)
        }
        guard let outcome else { return }
        outcome.cancel?.cancel()
        if let total = outcome.total { port.outstandingMoved(total) }
        perform(outcome.actions, enqueued: enqueued)
        if outcome.caughtUp { port.caughtUp(number) }
        // One report per turn of the event loop however many inputs changed the demand.
        if outcome.reportDemand { eventLoop.execute { [weak self] in self?.reportDemand() } }
        if outcome.idle { port.changed() }
    }

    /// The timer armed at the machine's deadline fired; a replaced one that ran anyway does nothing.
    private func timerFired(_ number: UInt64) {
        applyLocked { box, now in
            guard box.timer.fired(number) else { return [] }
            return box.machine.timerFired(now: now)
        }
    }

    /// Tells the dispatcher the partition's demand for sends, which shares
    /// the worker's limit by it: each change, coalesced per turn of the event loop.
    func reportDemand() {
        let demand: SendLimitShares.Demand? = box.withLock { box in
            box.demandReportScheduled = false
            guard !box.closed, box.reportedDemand != box.machine.sendDemand else { return nil }
            box.reportedDemand = box.machine.sendDemand
            return box.reportedDemand
        }
        if let demand { port?.demandChanged(number, demand) }
    }

    /// Takes an outcome or acknowledgement from another thread; the first
    /// one of a batch schedules the drain.
    func deliver(_ arrival: Arrival) {
        let first = inbox.withLock { inbox in
            inbox.arrivals.append(arrival)
            guard !inbox.drainScheduled else { return false }
            inbox.drainScheduled = true
            return true
        }
        if first { eventLoop.execute { [self] in drain() } }
    }

    private func drain() {
        guard let port else { return }
        let arrivals = inbox.withLock { inbox in
            inbox.drainScheduled = false
            defer { inbox.arrivals = [] }
            return inbox.arrivals
        }
        guard !arrivals.isEmpty else { return }
        defer {
            let answered = arrivals.count { arrival in
                switch arrival {
                case .sent, .acknowledged: true
                case .channel: false
                }
            }
            // A revoked partition's last answer: its release may go on.
            if unanswered.subtract(answered, ordering: .relaxed).newValue == 0, quiescedNow.load(ordering: .relaxed) { port.settled(number) }
        }
        apply { machine, now in
            var actions: [PartitionDispatcher.Action] = []
            for arrival in arrivals {
                switch arrival {
                case .sent(let send, let outcome):
                    // Only a retry's backoff uses the jitter: no random draw per delivered push.
                    let jitter = outcome.isRetryable ? port.jitter() : 0
                    actions += machine.sendCompleted(send, outcome: outcome, now: now, jitter: jitter)
                case .acknowledged(let ticket):
                    actions += machine.acknowledged(ticket, now: now)
                case .channel(.created(let activity, let channelID)):
                    actions += machine.channelCreated(activity, id: channelID, now: now)
                case .channel(.createFailed(let activity, let reason, let retryable)):
                    actions += machine.channelCreateFailed(activity, reason: reason, retryable: retryable, now: now, jitter: port.jitter())
                case .channel(.deleted(let activity, let channel, let failure)):
                    actions += machine.channelDeleted(activity, channel, failure: failure, now: now)
                }
            }
            return actions
        }
    }

    private func perform(_ actions: [PartitionDispatcher.Action], enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>]) {
        guard let port else { return }
        var sends: [PartitionDispatcher.Send] = []
        for action in actions {
            switch action {
            case .send(let send):
                sends.append(send)
            case .produce(let produce):
                unanswered.add(1, ordering: .relaxed)
                watch(produce, pending: enqueued[produce.ticket] ?? port.enqueue(produce, partition: number), attempt: 0, started: produce.trace == nil ? nil : port.now)
            case .commit(let topic, let offset):
                // A lingering partition's commands are no longer this worker's to commit.
                if topic == .commands, lingers.load(ordering: .relaxed) { continue }
                port.commit(topic, partition: number, offset: offset)
            case .observe(let observation):
                port.observe(observation)
            case .channel(let request):
                port.channel(request) { [weak self] report in self?.deliver(.channel(report)) }
            }
        }
        guard !sends.isEmpty else { return }
        unanswered.add(sends.count, ordering: .relaxed)
        let started = ContinuousClock.now
        let batch = sends
        port.sender.submit(batch) { [weak self] index, result in
            self?.port?.pushSent(batch[index], result, seconds: (ContinuousClock.now - started).seconds)
            self?.deliver(.sent(batch[index], result.outcome))
        }
    }

    /// Waits for Kafka's acknowledgement without a task; a refused record is
    /// enqueued again after a backoff (on the partition's ``RetryTimer``) until it is taken
    /// or the partition is gone, so no snapshot, token change or dead letter
    /// is skipped.
    /// `started`: when a traced write was first enqueued (nil for others).
    private func watch(_ produce: PartitionDispatcher.Produce, pending: Result<KafkaPendingDelivery, KafkaError>, attempt: Int, started: UnixTime?) {
        switch pending {
        case .success(let delivery):
            delivery.whenComplete { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let report):
                    if let started, let port = self.port { port.writeTraced(produce, report, started: started, ended: port.now) }
                    self.deliver(.acknowledged(produce.ticket))
                case .failure(let error): self.retryWrite(produce, error: error, attempt: attempt + 1, started: started)
                }
            }
        case .failure(let error):
            retryWrite(produce, error: error, attempt: attempt + 1, started: started)
        }
    }

    private func retryWrite(_ produce: PartitionDispatcher.Produce, error: KafkaError, attempt: Int, started: UnixTime?) {
        guard !isClosed, let port else { return }
        port.writeFailed(produce, error, attempt: attempt)
        if error.isPermanent {
            // Kafka refuses this record for good: give it up rather than block the partition.
            deliver(.acknowledged(produce.ticket))
            return
        }
        retries.schedule(after: Backoff.kafkaWrite.ceiling(attempt: attempt)) { [weak self] in
            guard let self, !self.isClosed else { return }
            guard let port = self.port else { return }
            self.watch(produce, pending: port.enqueue(produce, partition: self.number), attempt: attempt, started: started)
        }
    }
}

/// The I/O a ``PartitionRunner`` performs, and what it tells its owner:
/// the ``Dispatcher`` implements it; a test gives a fake.
protocol PartitionPort: AnyObject, Sendable {
    /// The wall clock the machine is given.
    var now: UnixTime { get }
    /// A draw in 0..<1 for a retry's backoff.
    func jitter() -> Double
    var sender: PushSender { get }
    func channel(_ request: PartitionDispatcher.ChannelRequest, done: @escaping @Sendable (BroadcastChannels.Report) -> Void)
    func enqueue(_ produce: PartitionDispatcher.Produce, partition: Int32) -> Result<KafkaPendingDelivery, KafkaError>
    func commit(_ topic: InternalTopic, partition: Int32, offset: Int64)
    func observe(_ observation: PartitionDispatcher.Observation)
    /// A send was answered: its result, and the seconds it took.
    func pushSent(_ send: PartitionDispatcher.Send, _ result: SendResult, seconds: Double)
    func writeFailed(_ produce: PartitionDispatcher.Produce, _ error: KafkaError, attempt: Int)
    /// A traced write (a traced push's snapshot) was acknowledged: where it
    /// landed, when it was first enqueued and now.
    func writeTraced(_ produce: PartitionDispatcher.Produce, _ report: KafkaDeliveryReport, started: UnixTime, ended: UnixTime)
    /// Adds to the worker's count of records in progress; returns the new total.
    func countOutstanding(_ delta: Int) -> Int
    /// The count moved to this total (called outside any partition's lock).
    func outstandingMoved(_ total: Int)
    /// The partition's demand for sends changed.
    func demandChanged(_ number: Int32, _ demand: SendLimitShares.Demand)
    /// The restored partition read its previous owner's commands.
    func caughtUp(_ number: Int32)
    /// The revoked partition has no send or write under way any more.
    func settled(_ number: Int32)
    /// While ``reportsIdle``: the partition is idle after an input.
    func changed()
    /// Whether the dispatcher waits for its partitions to be idle (it is draining).
    var reportsIdle: Bool { get }
}
