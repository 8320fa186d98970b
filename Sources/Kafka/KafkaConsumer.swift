import Logging
import ServiceLifecycle
import Synchronization

/// A member of a consumer group. Run it as a ServiceLifecycle `Service`
/// (``run()``) and read ``events`` from one task: assignment changes and
/// records come in one ordered sequence, an `.assigned` event always before
/// any record of the partitions it names.
///
/// Offsets are never stored automatically: call ``storeOffset(_:)`` (or
/// ``storeOffsets(_:)``) for what is fully processed; stored offsets are
/// committed periodically, on ``commit()``, before a revocation and on close.
/// Closing (graceful shutdown or ``close()``) commits stored offsets and
/// leaves the group.
///
/// A consumer made with ``init(assigningManually:logger:)`` joins no group:
/// the application chooses its partitions (``assign(_:)``, ``unassign(_:)``)
/// and its offsets are committed under its `group.id` as a plain offset store.
public final class KafkaConsumer: Service, Sendable {
    /// Called on the poll thread when partitions are revoked, before their
    /// stored offsets are committed and before they are unassigned: what the
    /// application finishes for them in the handler is committed, and no other
    /// member gets them before it returns. It blocks the consumer's polling,
    /// so it must return within a bound. `lost` is true when the assignment
    /// was lost (nothing can be committed any more).
    public typealias RevocationHandler = @Sendable (_ partitions: [TopicPartition], _ lost: Bool) -> Void

    private let client: RDKafkaConsumerClient
    /// The subscription; empty for a consumer that assigns manually.
    private let topics: [String]
    private let logger: Logger
    private let started = Mutex(false)

    /// Assignment changes and records, in order. Read it from one task only;
    /// it ends after the consumer closed. Iteration is bounded: when the
    /// reader falls `eventBufferCapacity` events behind, the poll thread waits.
    public let events: KafkaConsumerEvents

    /// Creates the consumer (no network activity until ``run()``).
    public init(
        configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger, onRevocation: RevocationHandler? = nil
    ) throws(KafkaError) {
        guard !topics.isEmpty else {
            throw KafkaError(code: .configuration, message: "a consumer needs at least one topic to subscribe to")
        }
        self.client = try RDKafkaConsumerClient(
            properties: configuration.librdkafkaProperties, bufferCapacity: configuration.eventBufferCapacity,
            logger: logger, onRevocation: onRevocation)
        self.topics = topics
        self.logger = logger
        self.events = KafkaConsumerEvents(buffer: client.buffer)
    }

    /// Creates a consumer that joins no group and reads the partitions given
    /// to ``assign(_:)``; `configuration.groupID` names where its offsets are
    /// committed (a group no member joins). ``events`` carries records only.
    public init(assigningManually configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) {
        self.client = try RDKafkaConsumerClient(
            properties: configuration.librdkafkaProperties, bufferCapacity: configuration.eventBufferCapacity,
            logger: logger, onRevocation: nil)
        self.topics = []
        self.logger = logger
        self.events = KafkaConsumerEvents(buffer: client.buffer)
    }

    /// Subscribes and polls on a dedicated thread until graceful shutdown or
    /// ``close()``; then commits stored offsets, leaves the group and ends ``events``.
    /// Throws when subscribing fails or the consumer hits a fatal error.
    public func run() async throws {
        try markStarted()
        if !topics.isEmpty {
            try client.subscribe(topics)
            logger.info("Kafka consumer subscribed", metadata: ["kafka.topics": "\(topics)"])
        }
        try await withGracefulShutdownHandler {
            try await client.runPollLoop()
        } onGracefulShutdown: {
            self.close()
        }
    }

    /// Polls until ``close()``, ignoring graceful shutdown: for a consumer
    /// whose owner closes it when its own shutdown is done.
    public func runUntilClosed() async throws {
        try markStarted()
        if !topics.isEmpty { try client.subscribe(topics) }
        try await client.runPollLoop()
    }

    /// Adds `partitions` to a manually assigned consumer's assignment, each
    /// read from its offset in `offsets` (the next offset to read), or from
    /// its committed offset (else `auto.offset.reset`) when it has none there.
    public func assign(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64] = [:]) throws(KafkaError) {
        guard topics.isEmpty else {
            throw KafkaError(code: .assignment, message: "a subscribed consumer's partitions are assigned by its group")
        }
        try client.incrementalAssign(partitions, offsets: offsets)
    }

    /// Removes `partitions` from a manually assigned consumer's assignment;
    /// their records not yet read from ``events`` are dropped.
    public func unassign(_ partitions: [TopicPartition]) throws(KafkaError) {
        guard topics.isEmpty else {
            throw KafkaError(code: .assignment, message: "a subscribed consumer's partitions are revoked by its group")
        }
        try client.incrementalUnassign(partitions)
    }

    /// Commits the stored offsets now and waits for the broker's answer,
    /// blocking the calling thread: for a ``RevocationHandler``, which runs
    /// on a poll thread of its own.
    public func commitBlocking() throws(KafkaError) {
        try client.commit(nil, asynchronous: false)
    }

    /// Commits the given next-offsets now and waits for the broker's
    /// answer, blocking the calling thread. A consumer that joins no group
    /// may commit offsets of partitions it is not assigned.
    public func commitBlocking(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        try client.commit(offsets, asynchronous: false)
    }

    /// The group's committed next-offsets for `partitions`, blocking the
    /// calling thread: for a ``RevocationHandler``.
    public func committedOffsetsBlocking(for partitions: [TopicPartition], timeout: Duration = .seconds(10)) throws(KafkaError) -> [TopicPartition: Int64] {
        try client.committed(partitions, timeoutMilliseconds: Int32(clamping: timeout.milliseconds))
    }

    private func markStarted() throws(KafkaError) {
        let alreadyStarted = started.withLock { started in
            defer { started = true }
            return started
        }
        if alreadyStarted {
            throw KafkaError(code: .closed, message: "a consumer runs once; create a new one to consume again")
        }
    }

    /// Starts closing: final commit of stored offsets, leave the group, end ``events``. Returns at once.
    public func close() {
        client.requestClose()
    }

    /// Partitions currently assigned to this member.
    public var assignment: Set<TopicPartition> {
        client.assignment.withLock { $0.assigned }
    }

    /// The partition's end offset as the last fetch from it reported it,
    /// without asking the broker (cheap enough to read every few
    /// milliseconds); nil before a fetch. A paused partition's stays as it
    /// was when it was paused.
    public func cachedEndOffset(_ partition: TopicPartition) -> Int64? {
        client.cachedEndOffset(partition)
    }

    /// Partitions the application paused and has not resumed.
    public var pausedPartitions: Set<TopicPartition> {
        client.assignment.withLock { $0.paused }
    }

    /// Marks `record` as processed: its offset + 1 is committed with the next commit.
    public func storeOffset(_ record: KafkaRecord) throws(KafkaError) {
        try client.storeOffsets([KafkaCommitOffset(topicPartition: record.topicPartition, offset: record.offset + 1)])
    }

    /// Stores next-offsets to commit (each is the last processed offset + 1).
    public func storeOffsets(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        try client.storeOffsets(offsets)
    }

    /// Commits the stored offsets and waits for the broker's answer (on a dedicated thread).
    public func commit() async throws(KafkaError) {
        let client = self.client
        let result = await DedicatedThread.run(name: "kafka-commit") { () -> Result<Void, KafkaError> in
            Result { () throws(KafkaError) in try client.commit(nil, asynchronous: false) }
        }
        try result.get()
    }

    /// Commits the given next-offsets and waits for the broker's answer.
    public func commit(_ offsets: [KafkaCommitOffset]) async throws(KafkaError) {
        let client = self.client
        let result = await DedicatedThread.run(name: "kafka-commit") { () -> Result<Void, KafkaError> in
            Result { () throws(KafkaError) in try client.commit(offsets, asynchronous: false) }
        }
        try result.get()
    }

    /// Starts committing the stored offsets without waiting; failures are logged.
    public func commitAsync() throws(KafkaError) {
        try client.commit(nil, asynchronous: true)
    }

    /// The group's committed next-offsets for `partitions`; partitions without one are left out.
    public func committedOffsets(
        for partitions: [TopicPartition], timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [TopicPartition: Int64] {
        let client = self.client
        let timeoutMilliseconds = Int32(clamping: timeout.milliseconds)
        let result = await DedicatedThread.run(name: "kafka-committed") {
            () -> Result<[TopicPartition: Int64], KafkaError> in
            Result { () throws(KafkaError) in
                try client.committed(partitions, timeoutMilliseconds: timeoutMilliseconds)
            }
        }
        return try result.get()
    }

    /// Stops fetching from the assigned ones among `partitions`; polling,
    /// heartbeats and rebalances go on. Unassigned partitions are ignored.
    public func pause(_ partitions: [TopicPartition]) throws(KafkaError) {
        let action = client.assignment.withLock { $0.pause(partitions) }
        switch action {
        case .apply(let toPause):
            try client.setPaused(toPause, paused: true)
        case .rejectClosed:
            throw KafkaError(code: .closed, message: "the consumer is closing; partitions can no longer be paused")
        }
    }

    /// Resumes fetching from paused `partitions`.
    public func resume(_ partitions: [TopicPartition]) throws(KafkaError) {
        let action = client.assignment.withLock { $0.resume(partitions) }
        switch action {
        case .apply(let toResume):
            try client.setPaused(toResume, paused: false)
        case .rejectClosed:
            throw KafkaError(code: .closed, message: "the consumer is closing; partitions can no longer be resumed")
        }
    }
}

/// The ordered events of a ``KafkaConsumer``. One reader at a time.
public struct KafkaConsumerEvents: AsyncSequence, Sendable {
    public typealias Element = KafkaConsumerEvent
    let buffer: BoundedEventBuffer<KafkaConsumerEvent>

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: BoundedEventBuffer<KafkaConsumerEvent>
        /// The current batch, reversed so events are moved out from its end without copies.
        private var reversedBatch: [KafkaConsumerEvent] = []

        init(buffer: BoundedEventBuffer<KafkaConsumerEvent>) {
            self.buffer = buffer
        }

        public mutating func next() async -> KafkaConsumerEvent? {
            await next(isolation: nil)
        }

        /// Stays on the caller's executor for events already taken from the buffer.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> KafkaConsumerEvent? {
            if let event = reversedBatch.popLast() { return event }
            guard var next = await buffer.next(), !next.isEmpty else { return nil }
            next.reverse()
            reversedBatch = consume next
            return reversedBatch.popLast()
        }
    }
}
