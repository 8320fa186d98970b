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
        /// The deadline the armed timer fires at, the timer, and its number.
        var armed: (at: UnixTime, timer: Scheduled<Void>, number: UInt64)?
        var timersArmed: UInt64 = 0
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
    private let services: DispatchServices
    /// Records Kafka refused for now, waiting out their backoff.
    private let retries: RetryTimer

    init(number: Int32, configuration: PartitionDispatcher.Configuration, eventLoop: any EventLoop, services: DispatchServices) {
        self.number = number
        self.eventLoop = eventLoop
        self.services = services
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
    var sendDemand: SendLimitShares.Demand { box.withLock { $0.machine.sendDemand } }
    var sendLimit: Int { box.withLock { $0.machine.sendLimit } }

    /// The activity's state as the machine holds it now; nil while the
    /// partition restores, once it is closed, or when the activity has none.
    func state(of activity: ActivityID) -> ActivityState? {
        guard !isRestoring else { return nil }
        return box.withLock { $0.closed ? nil : $0.machine.state(of: activity) }
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
        let (timer, total): (Scheduled<Void>?, Int?) = box.withLock { box in
            guard !box.closed else { return (nil, nil) }
            box.closed = true
            defer { box.armed = nil }
            let left = box.machine.outstanding
            return (box.armed?.timer, left == 0 ? nil : services.countOutstanding(-left))
        }
        timer?.cancel()
        retries.stop()
        if let total { services.outstandingMoved(total) }
    }

    /// Stops starting sends, channel requests and timers, for a revoked
    /// partition: the sends and writes under way still complete, and what
    /// they finish is committed.
    func quiesce() {
        let timer: Scheduled<Void>? = box.withLock { box in
            box.quiesced = true
            defer { box.armed = nil }
            return box.armed?.timer
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

    /// Ends the restore; returns false when the partition was closed meanwhile.
    func finishRestore() -> Bool {
        var finished = false
        applyLocked { box, now in
            finished = true
            restoringNow.store(false, ordering: .relaxed)
            return box.machine.finishRestore(now: now)
        }
        return finished
    }

    /// Feeds one input to the machine, performs its actions, and re-arms the timer.
    func apply(_ input: (inout PartitionDispatcher, UnixTime) -> [PartitionDispatcher.Action]) {
        applyLocked { box, now in input(&box.machine, now) }
    }

    private func applyLocked(_ input: (inout Box, UnixTime) -> [PartitionDispatcher.Action]) {
        let now = services.clock()
        var enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>] = [:]
        let outcome: (actions: [PartitionDispatcher.Action], total: Int?, cancel: Scheduled<Void>?, idle: Bool)? = box.withLock { box in
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
                enqueued[produce.ticket] = services.enqueue(produce, number)
            }
            let cancel = box.quiesced ? nil : rearm(&box, now: now)
            sendsInFlightNow.store(box.machine.sendsInFlight, ordering: .relaxed)
            catchingUpNow.store(box.machine.isCatchingUp, ordering: .relaxed)
            // Counted under the lock, so `close()` takes out exactly what is left.
            let delta = box.machine.outstanding - before
            let idle = services.reportsIdle() && box.machine.isIdle
            return (actions, delta == 0 ? nil : services.countOutstanding(delta), cancel, idle)
        }
        guard let outcome else { return }
        outcome.cancel?.cancel()
        if let total = outcome.total { services.outstandingMoved(total) }
        perform(outcome.actions, enqueued: enqueued)
        if outcome.idle { services.changed() }
    }

    /// Arms the timer at the machine's next deadline when that moved;
    /// returns the timer to cancel, if any.
    private func rearm(_ box: inout Box, now: UnixTime) -> Scheduled<Void>? {
        let next = box.machine.nextDeadline
        if let armed = box.armed, let next, armed.at == next { return nil }
        let previous = box.armed?.timer
        box.armed = nil
        if let next {
            let delay = max(0, next - now)
            let nanoseconds = Int64(exactly: (delay * 1e9).rounded(.up)) ?? Int64.max / 2
            box.timersArmed &+= 1
            let number = box.timersArmed
            let timer = eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { [weak self] () -> Void in self?.timerFired(number) }
            box.armed = (next, timer, number)
        }
        return previous
    }

    /// The armed timer is spent once it fired: the re-arm after it arms the
    /// next deadline even when that is the same one. The event loop's clock
    /// is monotonic, the machine's the wall clock: a timer may fire when the
    /// wall clock says its deadline is still ahead (a slewed or stepped
    /// clock), and re-arming only on a changed deadline left that partition
    /// with no timer at all. A cancelled timer that ran anyway leaves the
    /// armed one alone.
    private func timerFired(_ number: UInt64) {
        applyLocked { box, now in
            if box.armed?.number == number { box.armed = nil }
            return box.machine.timerFired(now: now)
        }
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
            if unanswered.subtract(answered, ordering: .relaxed).newValue == 0, quiescedNow.load(ordering: .relaxed) { services.changed() }
        }
        apply { machine, now in
            var actions: [PartitionDispatcher.Action] = []
            for arrival in arrivals {
                switch arrival {
                case .sent(let send, let outcome):
                    // Only a retry's backoff uses the jitter: no random draw per delivered push.
                    let jitter = outcome.isRetryable ? services.jitter() : 0
                    actions += machine.sendCompleted(send, outcome: outcome, now: now, jitter: jitter)
                case .acknowledged(let ticket):
                    actions += machine.acknowledged(ticket, now: now)
                case .channel(.created(let activity, let channelID)):
                    actions += machine.channelCreated(activity, id: channelID, now: now)
                case .channel(.createFailed(let activity, let reason, let retryable)):
                    actions += machine.channelCreateFailed(activity, reason: reason, retryable: retryable, now: now, jitter: services.jitter())
                case .channel(.deleted(let activity, let channel, let failure)):
                    actions += machine.channelDeleted(activity, channel, failure: failure, now: now)
                }
            }
            return actions
        }
    }

    private func perform(_ actions: [PartitionDispatcher.Action], enqueued: [UInt64: Result<KafkaPendingDelivery, KafkaError>]) {
        var sends: [PartitionDispatcher.Send] = []
        for action in actions {
            switch action {
            case .send(let send):
                sends.append(send)
            case .produce(let produce):
                unanswered.add(1, ordering: .relaxed)
                watch(produce, pending: enqueued[produce.ticket] ?? services.enqueue(produce, number), attempt: 0, started: produce.trace == nil ? nil : services.clock())
            case .commit(let topic, let offset):
                services.commit(topic, number, offset)
            case .observe(let observation):
                services.observe(observation)
            case .channel(let request):
                services.channels(request) { [weak self] report in self?.deliver(.channel(report)) }
            }
        }
        guard !sends.isEmpty else { return }
        unanswered.add(sends.count, ordering: .relaxed)
        let started = ContinuousClock.now
        let batch = sends
        services.sender.submit(batch) { [weak self] index, result in
            self?.services.pushSent(batch[index], result, (ContinuousClock.now - started).seconds)
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
                    if let started { self.services.writeTraced(produce, report, started, self.services.clock()) }
                    self.deliver(.acknowledged(produce.ticket))
                case .failure(let error): self.retryWrite(produce, error: error, attempt: attempt + 1, started: started)
                }
            }
        case .failure(let error):
            retryWrite(produce, error: error, attempt: attempt + 1, started: started)
        }
    }

    private func retryWrite(_ produce: PartitionDispatcher.Produce, error: KafkaError, attempt: Int, started: UnixTime?) {
        guard !isClosed else { return }
        services.writeFailed(produce, error, attempt)
        if error.isPermanent {
            // Kafka refuses this record for good: give it up rather than block the partition.
            deliver(.acknowledged(produce.ticket))
            return
        }
        retries.schedule(after: Backoff.kafkaWrite.ceiling(attempt: attempt)) { [weak self] in
            guard let self, !self.isClosed else { return }
            self.watch(produce, pending: self.services.enqueue(produce, self.number), attempt: attempt, started: started)
        }
    }
}

/// The I/O a ``PartitionRunner`` performs, supplied by the ``Dispatcher``.
struct DispatchServices: Sendable {
    var clock: @Sendable () -> UnixTime
    var jitter: @Sendable () -> Double
    var sender: PushSender
    var channels: @Sendable (PartitionDispatcher.ChannelRequest, @escaping @Sendable (BroadcastChannels.Report) -> Void) -> Void
    var enqueue: @Sendable (PartitionDispatcher.Produce, Int32) -> Result<KafkaPendingDelivery, KafkaError>
    var commit: @Sendable (InternalTopic, Int32, Int64) -> Void
    var observe: @Sendable (PartitionDispatcher.Observation) -> Void
    /// A send was answered: its result, and the seconds it took.
    var pushSent: @Sendable (PartitionDispatcher.Send, SendResult, Double) -> Void
    var writeFailed: @Sendable (PartitionDispatcher.Produce, KafkaError, Int) -> Void
    /// Adds to the worker's count of records in progress; returns the new total.
    var countOutstanding: @Sendable (Int) -> Int
    /// The count moved to this total: the back-pressure gate decides (outside any partition's lock).
    var outstandingMoved: @Sendable (Int) -> Void
    /// A traced write (a traced push's snapshot) was acknowledged: where it
    /// landed, when it was first enqueued and now.
    var writeTraced: @Sendable (PartitionDispatcher.Produce, KafkaDeliveryReport, UnixTime, UnixTime) -> Void = { _, _, _, _ in }
    /// Something the dispatcher may wait for happened: a revoked
    /// partition has no send or write under way any more, or, while
    /// `reportsIdle` says so, the partition is idle after an input.
    var changed: @Sendable () -> Void = {}
    /// Whether the dispatcher waits for its partitions to be idle (it is draining).
    var reportsIdle: @Sendable () -> Bool = { false }
}
