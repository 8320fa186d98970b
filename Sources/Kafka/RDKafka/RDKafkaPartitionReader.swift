import CRdKafka
import Foundation
import Logging

/// Reads partitions to their end (the fetcher's end of partition, at or
/// past the high watermark seen when the read started) with a non-group
/// `assign` consumer on a dedicated thread.
final class RDKafkaPartitionReader: Sendable {
    private let handle: RDKafkaHandle
    private let logger: Logger

    init(properties: [String: String], logger: Logger) throws(KafkaError) {
        var properties = properties
        // A group id is needed for the consumer API; this one never joins or commits.
        properties["group.id"] = "livedispatch-restore-\(UUID().uuidString.lowercased())"
        properties["enable.auto.commit"] = "false"
        properties["enable.auto.offset.store"] = "false"
        properties["enable.partition.eof"] = "true"
        properties["auto.offset.reset"] = "earliest"
        // A worker restores all its partitions at once, a reader each.
        properties.merge(KafkaPrefetch.properties) { configured, _ in configured }
        // The end of the partition is known when a fetch comes back empty:
        // the broker's long poll (500 ms by default) would hold every
        // restore that long, and a moved partition's new owner with it.
        properties.merge(["fetch.wait.max.ms": "10"]) { configured, _ in configured }
        self.handle = try RDKafkaHandle(kind: .consumer, properties: properties, context: RDKafkaClientContext(logger: logger))
        self.logger = logger
        rd_kafka_poll_set_consumer(handle.pointer)
    }

    /// The offset of the partition's first record with a timestamp at or
    /// after `milliseconds` (ListOffsets by time), or `end` when none is;
    /// blocks up to the timeout.
    private func offset(
        atTime milliseconds: Int64, topic: String, partition: Int32, end: Int64, timeoutMilliseconds: Int32
    ) -> Result<Int64, KafkaError> {
        let list = RDKafkaPartitionList.make([TopicPartition(topic: topic, partition: partition)], offsets: [milliseconds])
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let error = rd_kafka_offsets_for_times(handle.pointer, list, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(code: .restore, message: "could not find the offset of time \(milliseconds) ms in \(topic)[\(partition)]", error: error))
        }
        guard let entry = RDKafkaPartitionList.read(list).first else { return .success(end) }
        guard entry.error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(code: .restore, message: "could not find the offset of time \(milliseconds) ms in \(topic)[\(partition)]", error: entry.error))
        }
        // -1 (the logical end): no record is that recent.
        return .success(entry.offset < 0 ? end : entry.offset)
    }

    /// The timestamp of the record before `end`, nil when none arrives
    /// within the timeout or it has none; leaves nothing assigned.
    private func lastTimestamp(topic: String, partition: Int32, end: Int64, timeoutMilliseconds: Int32) -> Int64? {
        let rk = handle.pointer
        let list = RDKafkaPartitionList.make([TopicPartition(topic: topic, partition: partition)], offsets: [end - 1])
        let assignError = rd_kafka_assign(rk, list)
        rd_kafka_topic_partition_list_destroy(list)
        guard assignError == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        defer { _ = rd_kafka_assign(rk, nil) }
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int64(timeoutMilliseconds)) // not from a Double: an Int32 of milliseconds
        while clock.now < deadline {
            guard let message = rd_kafka_consumer_poll(rk, 100) else { continue }
            defer { rd_kafka_message_destroy(message) }
            switch message.pointee.err {
            case RD_KAFKA_RESP_ERR_NO_ERROR:
                var type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
                let time = rd_kafka_message_timestamp(message, &type)
                return type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : time
            case RD_KAFKA_RESP_ERR__PARTITION_EOF:
                return nil
            default:
                continue
            }
        }
        return nil
    }
}

extension RDKafkaPartitionReader {
    /// Reads several partitions at once on this one client (blocking), each
    /// as its ``PartitionRead`` says, and pushes what it reads; each
    /// partition ends with its `.caughtUp` at the fetcher's end of partition
    /// (records at or past the watermark are taken too: Tansu answers
    /// ListOffsets with the last batch's base offset). A failure pushes
    /// `.failure` and stops; so does the Swift side going away.
    func read(
        _ reads: [TopicPartition: PartitionRead], timeoutMilliseconds: Int32,
        into buffer: BoundedEventBuffer<Result<PartitionReadEvent, KafkaError>>
    ) {
        defer {
            _ = rd_kafka_consumer_close(handle.pointer)
            buffer.finish()
        }
        var highs: [TopicPartition: Int64] = [:]
        var starts: [TopicPartition: Int64] = [:]
        for partition in reads.keys.sorted() {
            switch start(of: partition, reads[partition] ?? .records, timeoutMilliseconds: timeoutMilliseconds) {
            case .failure(let failure):
                buffer.push([.failure(failure)])
                return
            case .success(.read(let start, _, let high)):
                highs[partition] = high
                starts[partition] = start
            case .success(.atEnd(let end)):
                guard buffer.push([.success(.caughtUp(partition, endOffset: end))]) else { return }
            }
        }
        guard !highs.isEmpty else { return }
        let rk = handle.pointer
        let assigned = highs.keys.sorted()
        let list = RDKafkaPartitionList.make(assigned, offsets: assigned.map { starts[$0] ?? 0 })
        let assignError = rd_kafka_assign(rk, list)
        rd_kafka_topic_partition_list_destroy(list)
        guard assignError == RD_KAFKA_RESP_ERR_NO_ERROR else {
            buffer.push([.failure(KafkaError(code: .restore, message: "could not assign \(assigned)", error: assignError))])
            return
        }
        var topicNames = RDKafkaMessage.TopicNames()
        var ends = highs
        var pending: [TopicPartition: [KafkaRecord]] = [:]
        var pendingCount = 0
        // `.latestPerKey` partitions: each key's last record so far.
        var latest: [TopicPartition: [[UInt8]?: KafkaRecord]] = [:]
        let clock = ContinuousClock()
        let stallLimit = Duration.milliseconds(Int64(timeoutMilliseconds)) // not from a Double: an Int32 of milliseconds
        var lastProgress = clock.now
        func flush(_ extra: [Result<PartitionReadEvent, KafkaError>] = []) -> Bool {
            let batch = pending.map { Result<PartitionReadEvent, KafkaError>.success(.records($0.key, $0.value)) } + extra
            pending = [:]
            pendingCount = 0
            return batch.isEmpty || buffer.push(batch)
        }
        while !highs.isEmpty {
            if clock.now - lastProgress > stallLimit {
                _ = flush([.failure(KafkaError(
                    code: .restore, message: "no progress reading \(highs.keys.sorted()) for \(stallLimit); is the partition leader reachable?",
                    isRetryable: true))])
                return
            }
            guard let message = rd_kafka_consumer_poll(rk, 100) else {
                guard flush() else { return }
                continue
            }
            defer { rd_kafka_message_destroy(message) }
            lastProgress = clock.now
            let raw = message.pointee
            let partition = TopicPartition(topic: raw.rkt.map { topicNames.name(of: $0) } ?? "", partition: raw.partition)
            switch raw.err {
            case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION,
                RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR__FATAL:
                _ = flush([.failure(KafkaError(code: .restore, message: "could not read \(partition)", error: raw.err))])
                return
            default:
                break
            }
            // A partition caught up is done: later records of it are not this read's.
            guard let high = highs[partition] else { continue }
            switch raw.err {
            case RD_KAFKA_RESP_ERR_NO_ERROR:
                ends[partition] = max(ends[partition] ?? high, raw.offset + 1)
                let read = reads[partition] ?? .records
                switch read {
                case .endOffset:
                    break
                case .latestPerKey:
                    let record = RDKafkaMessage.record(from: message, topicNames: &topicNames)
                    latest[partition, default: [:]][record.key] = record
                case .records, .recordsSince, .latestRecordsSince:
                    let record = RDKafkaMessage.record(from: message, topicNames: &topicNames)
                    // Older records are skipped even past the offset the
                    // lookup found: Tansu answers it with the partition's
                    // first offset for any time.
                    if let since = read.since, let time = record.timestampMilliseconds, time < since { break }
                    pending[partition, default: []].append(record)
                    pendingCount += 1
                }
            case RD_KAFKA_RESP_ERR__PARTITION_EOF:
                guard raw.offset >= high else { break }
                highs[partition] = nil
                guard flush() else { return }
                // Each key's last record, in offset order, in batches.
                let kept = (latest.removeValue(forKey: partition) ?? [:]).values.sorted { $0.offset < $1.offset }
                for first in stride(from: 0, to: kept.count, by: Self.batchSize) {
                    let batch = Array(kept[first..<min(first + Self.batchSize, kept.count)])
                    guard buffer.push([.success(.records(partition, batch))]) else { return }
                }
                let end = max(ends[partition] ?? high, raw.offset)
                guard buffer.push([.success(.caughtUp(partition, endOffset: end))]) else { return }
            default:
                logger.warning("Kafka restore read error", metadata: [
                    "kafka.topic": "\(partition.topic)", "kafka.partition": "\(partition.partition)",
                    "kafka.error": "\(String(cString: rd_kafka_err2name(raw.err)))",
                ])
            }
            if pendingCount >= Self.batchSize {
                guard flush() else { return }
            }
        }
    }

    /// The most records handed over at once.
    static let batchSize = 1_024

    /// Where a partition's read starts, or that there is nothing to read.
    private enum Start {
        /// Read from `offset` (perhaps the logical beginning, `low` being
        /// the first offset held); `high` is the watermark the end must reach.
        case read(from: Int64, low: Int64, high: Int64)
        /// Nothing to read: the partition ends at this offset.
        case atEnd(Int64)
    }

    /// Where to start reading `partition` for `read`: its watermarks, and
    /// for `.recordsSince` the first record of that time (a lookup by
    /// timestamp); `.latestRecordsSince` starts no earlier than its count
    /// of records before the end. Blocks up to the timeout.
    private func start(of partition: TopicPartition, _ read: PartitionRead, timeoutMilliseconds: Int32) -> Result<Start, KafkaError> {
        let (topic, number) = (partition.topic, partition.partition)
        var low: Int64 = 0
        var high: Int64 = 0
        let error = rd_kafka_query_watermark_offsets(handle.pointer, topic, number, &low, &high, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(code: .restore, message: "could not read the end offset of \(partition)", error: error))
        }
        guard high > low else { return .success(.atEnd(high)) }
        let beginning = Int64(RD_KAFKA_OFFSET_BEGINNING)
        switch read {
        case .records, .latestPerKey:
            return .success(.read(from: beginning, low: low, high: high))
        case .endOffset:
            return .success(.read(from: high, low: low, high: high))
        case .recordsSince(let since):
            return start(of: partition, since: since, low: low, high: high, timeoutMilliseconds: timeoutMilliseconds)
        case .latestRecordsSince(let since, let count):
            guard count > 0 else { return .success(.atEnd(high)) }
            let found = start(of: partition, since: since, low: low, high: high, timeoutMilliseconds: timeoutMilliseconds)
            guard case .success(.read(let from, _, _)) = found else { return found }
            let (last, overflow) = high.subtractingReportingOverflow(count)
            return .success(.read(from: max(from == beginning ? low : from, overflow ? low : last), low: low, high: high))
        }
    }

    /// Where the records of `since` or later begin in `partition`, whose
    /// watermarks are `low` and `high`.
    private func start(
        of partition: TopicPartition, since: Int64, low: Int64, high: Int64, timeoutMilliseconds: Int32
    ) -> Result<Start, KafkaError> {
        let (topic, number) = (partition.topic, partition.partition)
        switch offset(atTime: since, topic: topic, partition: number, end: high, timeoutMilliseconds: timeoutMilliseconds) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let offset) where offset < high:
            return .success(.read(from: offset, low: low, high: high))
        case .success:
            // "No record that recent" is also what a broker that cannot
            // look up by time answers (librdkafka's mock cluster): the
            // last record's time tells which. When it is recent, the
            // partition is read from its beginning.
            guard let last = lastTimestamp(topic: topic, partition: number, end: high, timeoutMilliseconds: timeoutMilliseconds),
                  last >= since
            else { return .success(.atEnd(high)) }
            return .success(.read(from: Int64(RD_KAFKA_OFFSET_BEGINNING), low: low, high: high))
        }
    }

    /// How many offsets each partition holds from its first record of
    /// `since` or later to its end (an upper bound of the records read:
    /// compaction and transaction markers leave gaps). Blocks up to the
    /// timeout per partition.
    func counts(
        _ partitions: [TopicPartition], since: Int64, timeoutMilliseconds: Int32
    ) -> Result<[TopicPartition: Int64], KafkaError> {
        defer { _ = rd_kafka_consumer_close(handle.pointer) }
        var counts: [TopicPartition: Int64] = [:]
        for partition in partitions.sorted() {
            switch start(of: partition, .recordsSince(since), timeoutMilliseconds: timeoutMilliseconds) {
            case .failure(let failure):
                return .failure(failure)
            case .success(.atEnd):
                counts[partition] = 0
            case .success(.read(let from, let low, let high)):
                counts[partition] = high - (from == Int64(RD_KAFKA_OFFSET_BEGINNING) ? low : from)
            }
        }
        return .success(counts)
    }
}
