import CRdKafka
import Logging
import Synchronization

/// A librdkafka group consumer driven by one dedicated poll thread.
///
/// The poll thread owns `rd_kafka_consumer_poll` and the rebalance callback
/// (which librdkafka only calls from inside poll and close), so assignment
/// events and records reach the ``BoundedEventBuffer`` in the order
/// librdkafka produced them: an `.assigned` event is pushed before the
/// partitions are handed to librdkafka, hence before any of their records.
final class RDKafkaConsumerClient: Sendable {
    let handle: RDKafkaHandle
    let buffer: BoundedEventBuffer<KafkaConsumerEvent>
    let assignment = Mutex(KafkaConsumer.AssignmentState())
    private let logger: Logger
    private let onRevocation: KafkaConsumer.RevocationHandler?
    private let closeRequested = Atomic<Bool>(false)
    private let pollState = PollThreadState()
    /// A fatal error that ended the poll loop.
    private let fatalError = Mutex<KafkaError?>(nil)
    /// Whether a ``wakeFetchers()`` request runs, and whether another must follow it.
    private let waking = Mutex(Waking.idle)
    private enum Waking { case idle, running, runningAgain }

    /// What the poll thread alone touches: the events gathered during one
    /// poll round (the rebalance callback appends to it) and a cache of topic names.
    ///
    /// `@unchecked Sendable` is safe: only the poll thread reads or writes it,
    /// including from the rebalance callback, which librdkafka calls on that thread.
    private final class PollThreadState: @unchecked Sendable {
        var pending: [KafkaConsumerEvent] = []
        var topicNames = RDKafkaMessage.TopicNames()
        var rebalances = 0
        /// Partitions revoked while a batch call was being served.
        var revokedDuringBatch: Set<TopicPartition> = []
    }

    init(
        properties: [String: String], bufferCapacity: Int, logger: Logger, onRevocation: KafkaConsumer.RevocationHandler?
    ) throws(KafkaError) {
        let context = RDKafkaClientContext(logger: logger)
        self.logger = logger
        self.onRevocation = onRevocation
        self.buffer = BoundedEventBuffer(capacity: bufferCapacity)
        self.handle = try RDKafkaHandle(kind: .consumer, properties: properties, context: context) { configuration in
            rd_kafka_conf_set_rebalance_cb(configuration) { handle, error, partitions, opaque in
                guard let handle, let partitions, let opaque else { return }
                let context = RDKafkaClientContext.from(opaque)
                if let handler = context.rebalanceHandler.withLock({ $0 }) {
                    handler(handle, error, partitions)
                } else {
                    RDKafkaConsumerClient.unassign(handle, error: error, partitions: partitions)
                }
            }
            rd_kafka_conf_set_offset_commit_cb(configuration) { handle, error, _, opaque in
                guard let opaque, error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET else {
                    return
                }
                RDKafkaClientContext.from(opaque).logger.warning(
                    "Kafka offset commit failed",
                    metadata: [
                        "kafka.error": "\(String(cString: rd_kafka_err2name(error)))",
                        "kafka.message": "\(String(cString: rd_kafka_err2str(error)))",
                    ])
                _ = handle
            }
        }
        // Route the main queue (errors, logs, commit results) to the consumer queue served by poll.
        rd_kafka_poll_set_consumer(handle.pointer)
        context.rebalanceHandler.withLock { handler in
            handler = { [weak self] handle, error, partitions in
                if let self {
                    self.rebalance(handle: handle, error: error, partitions: partitions)
                } else {
                    RDKafkaConsumerClient.unassign(handle, error: error, partitions: partitions)
                }
            }
        }
    }

    /// Keeps librdkafka's rebalance going when no consumer is left to hear
    /// about it: assignments are refused, revocations accepted.
    private static func unassign(
        _ handle: OpaquePointer, error: rd_kafka_resp_err_t,
        partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        if String(cString: rd_kafka_rebalance_protocol(handle)) == "COOPERATIVE" {
            if error == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, let failure = rd_kafka_incremental_unassign(handle, partitions) {
                rd_kafka_error_destroy(failure)
            }
        } else {
            _ = rd_kafka_assign(handle, nil)
        }
    }

    func subscribe(_ topics: [String]) throws(KafkaError) {
        // librdkafka aborts on allocation failure: the list is never NULL.
        let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t> = rd_kafka_topic_partition_list_new(
            Int32(max(1, topics.count)))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics { rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA) }
        let error = rd_kafka_subscribe(handle.pointer, list)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(code: .subscribe, message: "could not subscribe to \(topics)", error: error)
        }
    }

    // MARK: Poll thread

    /// Runs the poll loop on a dedicated thread until close is requested,
    /// then commits, leaves the group and finishes the event buffer.
    func runPollLoop() async throws(KafkaError) {
        await DedicatedThread.run(name: "kafka-consumer-poll") { [self] in
            pollLoop()
        }
        if let error = fatalError.withLock({ $0 }) { throw error }
    }

    /// Asks the poll loop to close; returns at once.
    func requestClose() {
        let action = assignment.withLock { $0.closeRequested() }
        switch action {
        case .close:
            closeRequested.store(true, ordering: .releasing)
            buffer.makeUnbounded()
        case .none:
            break
        }
    }

    private func pollLoop() {
        let rk = handle.pointer
        // Wait for one message with consumer_poll, then take whatever else is
        // ready in one call: far fewer queue operations per record.
        let queue = rd_kafka_queue_get_consumer(rk)
        let batchSize = 1024
        let messages = UnsafeMutablePointer<UnsafeMutablePointer<rd_kafka_message_t>?>.allocate(capacity: batchSize)
        defer { messages.deallocate() }
        while !closeRequested.load(ordering: .acquiring) {
            if let message = rd_kafka_consumer_poll(rk, 100) {
                handle(message: message)
                if let queue {
                    pollState.revokedDuringBatch = []
                    let count = rd_kafka_consume_batch_queue(queue, 0, messages, batchSize)
                    for index in 0..<max(0, count) {
                        guard let message = messages[index] else { continue }
                        // A revocation served inside this call purged its
                        // partitions; records dequeued before it must go too.
                        if !pollState.revokedDuringBatch.isEmpty, message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR,
                            let rkt = message.pointee.rkt,
                            pollState.revokedDuringBatch.contains(
                                TopicPartition(
                                    topic: String(cString: rd_kafka_topic_name(rkt)), partition: message.pointee.partition))
                        {
                            rd_kafka_message_destroy(message)
                            continue
                        }
                        handle(message: message)
                    }
                }
            }
            flushPending()
        }
        if let queue { rd_kafka_queue_destroy(queue) }
        buffer.makeUnbounded()
        if fatalError.withLock({ $0 }) == nil {
            finalCommit()
        }
        let closeError = rd_kafka_consumer_close(rk)
        if closeError != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning(
                "Kafka consumer close reported an error",
                metadata: ["kafka.error": "\(String(cString: rd_kafka_err2name(closeError)))"])
        }
        flushPending()
        assignment.withLock { $0.closed() }
        buffer.finish()
        logger.debug("Kafka consumer closed")
    }

    private func flushPending() {
        guard !pollState.pending.isEmpty else { return }
        let batch = pollState.pending
        pollState.pending = []
        pollState.pending.reserveCapacity(batch.count)
        buffer.push(batch)
    }

    private func handle(message: UnsafeMutablePointer<rd_kafka_message_t>) {
        defer { rd_kafka_message_destroy(message) }
        let error = message.pointee.err
        if error == RD_KAFKA_RESP_ERR_NO_ERROR {
            pollState.pending.append(.record(RDKafkaMessage.record(from: message, topicNames: &pollState.topicNames)))
            return
        }
        if error == RD_KAFKA_RESP_ERR__PARTITION_EOF { return }
        if error == RD_KAFKA_RESP_ERR__FATAL {
            var text = [CChar](repeating: 0, count: 512)
            let fatal = rd_kafka_fatal_error(handle.pointer, &text, text.count)
            let failure = KafkaError(
                code: .subscribe, message: "the consumer hit a fatal error and stopped; restart it",
                error: fatal, detail: RDKafkaHandle.string(text))
            logger.error("Kafka consumer fatal error", metadata: ["kafka.error": "\(failure)"])
            fatalError.withLock { $0 = $0 ?? failure }
            requestClose()
            return
        }
        let detail = rd_kafka_message_errstr(message).map { String(cString: $0) } ?? ""
        logger.warning(
            "Kafka consumer error",
            metadata: [
                "kafka.error": "\(String(cString: rd_kafka_err2name(error)))", "kafka.message": "\(detail)",
            ])
    }

    /// The rebalance callback, on the poll thread (inside poll or close).
    private func rebalance(
        handle rk: OpaquePointer, error: rd_kafka_resp_err_t,
        partitions list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        let partitions = RDKafkaPartitionList.read(list).map(\.topicPartition)
        let cooperative = String(cString: rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE"
        pollState.rebalances += 1
        switch error {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            let action = assignment.withLock { $0.assigned(partitions) }
            switch action {
            case .assign(let assigned):
                pollState.pending.append(.assigned(assigned))
            }
            if let error = apply(rk, list, cooperative: cooperative, assign: true) {
                logger.error("Kafka partition assignment failed", metadata: ["kafka.error": "\(error)"])
            }
            logger.info(
                "Kafka partitions assigned",
                metadata: ["kafka.partitions": "\(partitions.sorted().map(\.description))"])
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(rk) != 0
            let action = assignment.withLock { $0.revoked(partitions, lost: lost) }
            switch action {
            case .revoke(let revoked, let commitFirst):
                let revokedSet = Set(revoked)
                let belongsToRevoked: (KafkaConsumerEvent) -> Bool = { event in
                    if case .record(let record) = event { return revokedSet.contains(record.topicPartition) }
                    return false
                }
                pollState.pending.removeAll(where: belongsToRevoked)
                pollState.revokedDuringBatch.formUnion(revokedSet)
                buffer.removeAll(where: belongsToRevoked)
                // The application lets go (and stores what it finished) before the commit.
                onRevocation?(revoked, lost)
                if commitFirst { commitStoredOffsets(reason: "revoke") }
                pollState.pending.append(.revoked(revoked, lost: lost))
            }
            if let error = apply(rk, list, cooperative: cooperative, assign: false) {
                logger.error("Kafka partition revocation failed", metadata: ["kafka.error": "\(error)"])
            }
            logger.info(
                "Kafka partitions revoked",
                metadata: ["kafka.partitions": "\(partitions.sorted().map(\.description))", "kafka.lost": "\(lost)"])
        default:
            logger.warning(
                "Kafka rebalance error", metadata: ["kafka.error": "\(String(cString: rd_kafka_err2name(error)))"])
            _ = rd_kafka_assign(rk, nil)
        }
        if cooperative, !closeRequested.load(ordering: .acquiring) { wakeFetchers() }
    }

    /// Gets the fetching of resumed partitions going again: after a
    /// cooperative rebalance callback, and after ``setPaused(_:paused:)``
    /// resumes partitions.
    ///
    /// librdkafka pauses every assigned partition while the application
    /// serves a rebalance and resumes them when the callback assigns or
    /// unassigns; the application pauses partitions itself (back-pressure,
    /// a partition restoring). A resume does not wake a broker thread left
    /// with nothing to fetch: it idles until its longest wait (a second)
    /// runs out, and the resumed partitions deliver nothing meanwhile. A
    /// ListOffsets request for the assignment goes to each leader's broker
    /// thread and wakes it, and the answer wakes it again, by when the
    /// resume has been applied. It runs on a thread of its own, so a slow
    /// broker holds up nothing here, one at a time: a resume while one runs
    /// is served by one more request after it.
    func wakeFetchers() {
        let start = waking.withLock { waking in
            defer { waking = waking == .idle ? .running : .runningAgain }
            return waking == .idle
        }
        guard start else { return }
        let handle = self.handle
        DedicatedThread.start(name: "kafka-wake-fetchers") { [self] in
            repeat {
                var current: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
                if rd_kafka_assignment(handle.pointer, &current) == RD_KAFKA_RESP_ERR_NO_ERROR, let list = current {
                    if list.pointee.cnt > 0 {
                        // Asks for the latest offsets; the answer itself is not used.
                        for index in 0..<Int(list.pointee.cnt) { list.pointee.elems[index].offset = Int64(RD_KAFKA_OFFSET_END) }
                        _ = rd_kafka_offsets_for_times(handle.pointer, list, 1_000)
                    }
                    rd_kafka_topic_partition_list_destroy(list)
                }
            } while self.waking.withLock { waking in
                defer { waking = waking == .runningAgain ? .running : .idle }
                return waking == .runningAgain
            }
        }
    }

    /// Assigns or unassigns `list`: incrementally under the cooperative
    /// protocol, the whole assignment under the eager one.
    private func apply(
        _ rk: OpaquePointer, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, cooperative: Bool,
        assign: Bool
    ) -> KafkaError? {
        let message = assign ? "could not assign partitions" : "could not unassign partitions"
        if cooperative {
            let failure = assign ? rd_kafka_incremental_assign(rk, list) : rd_kafka_incremental_unassign(rk, list)
            return failure.map { KafkaError(code: .assignment, message: message, consuming: $0) }
        }
        let error = rd_kafka_assign(rk, assign ? list : nil)
        guard error != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(code: .assignment, message: message, error: error)
    }

    @discardableResult
    private func commitStoredOffsets(reason: String) -> rd_kafka_resp_err_t {
        let error = rd_kafka_commit(handle.pointer, nil, 0)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET {
            logger.warning(
                "Kafka commit of stored offsets failed",
                metadata: [
                    "kafka.reason": "\(reason)", "kafka.error": "\(String(cString: rd_kafka_err2name(error)))",
                ])
        }
        return error
    }

    /// The commit before leaving the group. When another member's departure
    /// left this member's generation stale, keep polling (serving the
    /// rebalance) until the group settles, then commit again; when the
    /// coordinator was unreachable or slow (a timeout, a coordinator move),
    /// poll for a moment and commit again. At most `finalCommitPatience`
    /// rounds of 100 ms in all.
    private func finalCommit() {
        let finalCommitPatience = 150
        let rebalancing = [
            RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID,
        ]
        let transient = [
            RD_KAFKA_RESP_ERR__WAIT_COORD, RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR__TRANSPORT,
        ]
        var error = commitStoredOffsets(reason: "close")
        var rounds = 0
        while rounds < finalCommitPatience, rebalancing.contains(error) || transient.contains(error) {
            let generationBefore = generation
            let awaitRebalance = rebalancing.contains(error)
            var waited = 0
            while rounds < finalCommitPatience, awaitRebalance ? generation == generationBefore : waited < 5 {
                if let message = rd_kafka_consumer_poll(handle.pointer, 100) { handle(message: message) }
                rounds += 1
                waited += 1
            }
            flushPending()
            error = commitStoredOffsets(reason: "close")
        }
    }

    /// Counts assignment changes seen by the rebalance callback (poll thread only).
    private var generation: Int { pollState.rebalances }

    // MARK: Application calls

    /// Stores `offsets` (next offset to consume) for the next commit.
    func storeOffsets(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        try RDKafkaPartitionList.with(offsets.map(\.topicPartition), offsets: offsets.map(\.offset)) {
            list throws(KafkaError) in
            let error = rd_kafka_offsets_store(handle.pointer, list)
            let failed = RDKafkaPartitionList.read(list).first { $0.error != RD_KAFKA_RESP_ERR_NO_ERROR }
            if let failed {
                throw KafkaError(
                    code: .offsetStore,
                    message: "could not store the offset of \(failed.topicPartition); it is probably no longer assigned",
                    error: failed.error)
            }
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(code: .offsetStore, message: "could not store offsets", error: error)
            }
        }
    }

    /// Commits stored offsets (nil) or the given ones. Blocks when `asynchronous` is false.
    func commit(_ offsets: [KafkaCommitOffset]?, asynchronous: Bool) throws(KafkaError) {
        let error: rd_kafka_resp_err_t
        if let offsets {
            guard !offsets.isEmpty else { return }
            error = try RDKafkaPartitionList.with(offsets.map(\.topicPartition), offsets: offsets.map(\.offset)) { list in
                rd_kafka_commit(handle.pointer, list, asynchronous ? 1 : 0)
            }
        } else {
            error = rd_kafka_commit(handle.pointer, nil, asynchronous ? 1 : 0)
        }
        if error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET {
            throw KafkaError(code: .commit, message: "could not commit offsets", error: error)
        }
    }

    /// Adds partitions to the assignment of a consumer that assigns manually.
    func incrementalAssign(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64]) throws(KafkaError) {
        let added = assignment.withLock { state in
            let new = Set(partitions).subtracting(state.assigned).sorted()
            _ = state.assigned(new)
            return new
        }
        guard !added.isEmpty else { return }
        // RD_KAFKA_OFFSET_STORED (-1000): the committed offset, else auto.offset.reset.
        let starts = added.map { offsets[$0] ?? -1000 }
        let failure = try RDKafkaPartitionList.with(added, offsets: starts) { list in rd_kafka_incremental_assign(handle.pointer, list) }
        if let failure {
            _ = assignment.withLock { $0.revoked(added, lost: true) }
            throw KafkaError(code: .assignment, message: "could not assign \(added)", consuming: failure)
        }
    }

    /// Removes partitions from the assignment of a consumer that assigns
    /// manually; records of theirs still buffered are dropped.
    func incrementalUnassign(_ partitions: [TopicPartition]) throws(KafkaError) {
        let removed = assignment.withLock { state in
            let assigned = partitions.filter(state.assigned.contains)
            _ = state.revoked(assigned, lost: false)
            return assigned
        }
        guard !removed.isEmpty else { return }
        let failure = try RDKafkaPartitionList.with(removed) { list in rd_kafka_incremental_unassign(handle.pointer, list) }
        let gone = Set(removed)
        buffer.removeAll { event in
            if case .record(let record) = event { return gone.contains(record.topicPartition) }
            return false
        }
        if let failure {
            throw KafkaError(code: .assignment, message: "could not unassign \(removed)", consuming: failure)
        }
    }

    /// The group's committed offsets (blocking); partitions without one are left out.
    func committed(_ partitions: [TopicPartition], timeoutMilliseconds: Int32) throws(KafkaError) -> [TopicPartition:
        Int64]
    {
        try RDKafkaPartitionList.with(partitions) { list throws(KafkaError) in
            let error = rd_kafka_committed(handle.pointer, list, timeoutMilliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(code: .commit, message: "could not read committed offsets", error: error)
            }
            var result: [TopicPartition: Int64] = [:]
            for entry in RDKafkaPartitionList.read(list) where entry.offset >= 0 {
                result[entry.topicPartition] = entry.offset
            }
            return result
        }
    }

    /// The partition's end offset as of the last fetch from it (no request
    /// to the broker); nil before one.
    func cachedEndOffset(_ partition: TopicPartition) -> Int64? {
        var low: Int64 = 0
        var high: Int64 = 0
        let error = rd_kafka_get_watermark_offsets(handle.pointer, partition.topic, partition.partition, &low, &high)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR, high >= 0 else { return nil }
        return high
    }

    /// Pauses (or resumes) fetching for `partitions`; polling continues.
    func setPaused(_ partitions: [TopicPartition], paused: Bool) throws(KafkaError) {
        guard !partitions.isEmpty else { return }
        try RDKafkaPartitionList.with(partitions) { list throws(KafkaError) in
            let error =
                paused ? rd_kafka_pause_partitions(handle.pointer, list) : rd_kafka_resume_partitions(handle.pointer, list)
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(
                    code: .pause, message: "could not \(paused ? "pause" : "resume") \(partitions)", error: error)
            }
        }
        if !paused { wakeFetchers() }
    }
}
