import Logging

/// Reads partitions up to their end offset at the time of the call, the
/// way the worker restores its stores from changelog topics. Each read
/// uses its own non-group consumer (`assign`), so it never disturbs a
/// consumer group.
public struct KafkaPartitionReader: Sendable {
    public var configuration: KafkaClientConfiguration
    public var logger: Logger

    public init(configuration: KafkaClientConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Calls `body` for every record of `topic`/`partition` below the end
    /// offset seen when the read starts, in offset order, and returns that end
    /// offset once caught up. An empty partition returns at once. Fails when
    /// the end offset cannot be read, or nothing arrives for `timeout`.
    @discardableResult
    public func readToEnd(
        topic: String, partition: Int32, timeout: Duration = .seconds(30),
        _ body: (KafkaRecord) async throws -> Void
    ) async throws -> Int64 {
        try await readBatchesToEnd(topic: topic, partition: partition, timeout: timeout) { records in
            for record in records { try await body(record) }
        }
    }

    /// ``readToEnd(topic:partition:timeout:_:)`` a batch at a time (up to
    /// 1,024 records, in offset order), for a caller that applies a batch
    /// under one lock take. With `since` (milliseconds since the Unix
    /// epoch), the read starts at the first record of that time or later,
    /// found by timestamp (librdkafka's `offsets_for_times`), and records
    /// older than that are skipped.
    @discardableResult
    public func readBatchesToEnd(
        topic: String, partition: Int32, since: Int64? = nil, timeout: Duration = .seconds(30),
        _ body: ([KafkaRecord]) async throws -> Void
    ) async throws -> Int64 {
        var end: Int64 = 0
        let read = since.map(PartitionRead.recordsSince) ?? .records
        try await self.read([TopicPartition(topic: topic, partition: partition): read], timeout: timeout) { event in
            switch event {
            case .records(_, let records): try await body(records)
            case .caughtUp(_, let endOffset): end = endOffset
            }
        }
        return end
    }

    /// Reads several partitions at once, on one client, each as its
    /// ``PartitionRead`` says: records in offset order, in batches of up to
    /// 1,024. Every partition ends with its `.caughtUp` (the offset its next
    /// record will get); returns once all have. A worker restoring a
    /// partition reads its changelogs and the ends of its inputs this way,
    /// one connection to the broker instead of one per partition read.
    public func read(
        _ reads: [TopicPartition: PartitionRead], timeout: Duration = .seconds(30),
        _ body: (PartitionReadEvent) async throws -> Void
    ) async throws {
        guard !reads.isEmpty else { return }
        let reader = try RDKafkaPartitionReader(properties: configuration.librdkafkaProperties, logger: logger)
        let buffer = BoundedEventBuffer<Result<PartitionReadEvent, KafkaError>>(capacity: 16)
        let milliseconds = Int32(clamping: timeout.milliseconds)
        DedicatedThread.start(name: "kafka-restore") {
            reader.read(reads, timeoutMilliseconds: milliseconds, into: buffer)
        }
        defer { buffer.cancel() }
        var open = reads.count
        while let events = await buffer.next() {
            for event in events {
                let event = try event.get()
                try await body(event)
                if case .caughtUp = event {
                    open -= 1
                    if open == 0 { return }
                }
            }
        }
        try Task.checkCancellation()
        throw KafkaError(code: .restore, message: "the read of \(reads.keys.sorted()) ended before catching up")
    }

    /// The partition's end offset (the offset its next record will get) now.
    /// ListOffsets' answer is checked by fetching from it to the end of the
    /// partition: some brokers (Tansu) answer it with the base offset of the
    /// last batch, short of the records in that batch.
    public func endOffset(topic: String, partition: Int32, timeout: Duration = .seconds(30)) async throws -> Int64 {
        var end: Int64 = 0
        try await read([TopicPartition(topic: topic, partition: partition): .endOffset], timeout: timeout) { event in
            if case .caughtUp(_, let endOffset) = event { end = endOffset }
        }
        return end
    }

    /// How many offsets each of `partitions` holds from its first record
    /// with a timestamp at or after `since` (milliseconds since the Unix
    /// epoch) to its end: an upper bound of what a read since then gives.
    public func counts(
        _ partitions: [TopicPartition], since: Int64, timeout: Duration = .seconds(30)
    ) async throws -> [TopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let reader = try RDKafkaPartitionReader(properties: configuration.librdkafkaProperties, logger: logger)
        let milliseconds = Int32(clamping: timeout.milliseconds)
        return try await DedicatedThread.run(name: "kafka-counts") {
            reader.counts(partitions, since: since, timeoutMilliseconds: milliseconds)
        }.get()
    }

    /// Reads the records of `partitions` since `since`, at most `limit` of
    /// them spread over every partition: each partition gives its share
    /// of the limit (``RecordSample/shares(counts:limit:)``), its most
    /// recent records. Records come in batches, in offset order per
    /// partition, the partitions interleaved.
    public func readSample(
        _ partitions: [TopicPartition], since: Int64, limit: Int, timeout: Duration = .seconds(30),
        _ body: ([KafkaRecord]) async throws -> Void
    ) async throws {
        let counts = try await self.counts(partitions, since: since, timeout: timeout)
        let shares = RecordSample.shares(counts: counts, limit: Int64(limit))
        var reads: [TopicPartition: PartitionRead] = [:]
        for (partition, share) in shares where share > 0 { reads[partition] = .latestRecordsSince(since, count: share) }
        try await read(reads, timeout: timeout) { event in
            if case .records(_, let records) = event { try await body(records) }
        }
    }

    /// Every record of the partition up to its end offset, in offset order.
    public func readAll(topic: String, partition: Int32, timeout: Duration = .seconds(30)) async throws -> [KafkaRecord] {
        var records: [KafkaRecord] = []
        try await readToEnd(topic: topic, partition: partition, timeout: timeout) { records.append($0) }
        return records
    }
}

/// What ``KafkaPartitionReader/read(_:timeout:_:)`` reads of a partition.
public enum PartitionRead: Sendable, Hashable {
    /// Every record, from the beginning.
    case records
    /// Every record from the first with a timestamp at or after this
    /// (milliseconds since the Unix epoch), found by a lookup by time; older
    /// records after it are skipped too.
    case recordsSince(Int64)
    /// Each key's last record (a tombstone included), from the beginning,
    /// handed over in offset order when the partition is read to its end:
    /// what a changelog holds once compacted, without decoding what
    /// compaction would drop.
    case latestPerKey
    /// Only the end offset.
    case endOffset
    /// The last `count` records (at most) from the first with a timestamp
    /// at or after `since`, to the end: a partition's most recent share of
    /// a sample (see ``RecordSample``).
    case latestRecordsSince(Int64, count: Int64)

    /// The time before which records are skipped, if any.
    var since: Int64? {
        switch self {
        case .recordsSince(let since), .latestRecordsSince(let since, _): since
        case .records, .latestPerKey, .endOffset: nil
        }
    }
}

/// What a read of several partitions gives, in order per partition.
public enum PartitionReadEvent: Sendable {
    case records(TopicPartition, [KafkaRecord])
    /// The partition read to its end: the offset its next record will get.
    case caughtUp(TopicPartition, endOffset: Int64)
}
