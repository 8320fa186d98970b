import CRdKafka
import Foundation
import Logging

/// What the reader thread hands to Swift while reading a partition to its end.
enum RestoreEvent: Sendable {
    case records([KafkaRecord])
    case caughtUp(endOffset: Int64)
    case failed(KafkaError)
}

/// Reads one partition from its beginning to its end (the fetcher's end of
/// partition, at or past the high watermark seen when the read started),
/// with a non-group `assign` consumer on a dedicated thread.
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

    /// The partition's end offset now: the offset after its last record;
    /// blocks up to the timeout. ListOffsets' answer is checked by fetching
    /// from it to the end of the partition, as a restore does: some brokers
    /// (Tansu) answer it with the base offset of the last batch, short of
    /// the records in that batch.
    func endOffset(topic: String, partition: Int32, timeoutMilliseconds: Int32) -> Result<Int64, KafkaError> {
        defer { _ = rd_kafka_consumer_close(handle.pointer) }
        let rk = handle.pointer
        var low: Int64 = 0
        var high: Int64 = 0
        let error = rd_kafka_query_watermark_offsets(rk, topic, partition, &low, &high, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(code: .restore, message: "could not read the end offset of \(topic)[\(partition)]", error: error))
        }
        guard high > low else { return .success(high) }
        let list = RDKafkaPartitionList.make([TopicPartition(topic: topic, partition: partition)], offsets: [high])
        let assignError = rd_kafka_assign(rk, list)
        rd_kafka_topic_partition_list_destroy(list)
        guard assignError == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(code: .restore, message: "could not assign \(topic)[\(partition)]", error: assignError))
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int64(timeoutMilliseconds)) // not from a Double: an Int32 of milliseconds
        var end = high
        while clock.now < deadline {
            guard let message = rd_kafka_consumer_poll(rk, 100) else { continue }
            defer { rd_kafka_message_destroy(message) }
            switch message.pointee.err {
            case RD_KAFKA_RESP_ERR_NO_ERROR:
                end = max(end, message.pointee.offset + 1)
            case RD_KAFKA_RESP_ERR__PARTITION_EOF:
                return .success(max(end, message.pointee.offset))
            default:
                continue
            }
        }
        return .failure(KafkaError(
            code: .restore, message: "no end of \(topic)[\(partition)] reached within \(timeoutMilliseconds) ms; is the partition leader reachable?",
            isRetryable: true))
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

    /// Reads (blocking) and pushes records, then `.caughtUp` or `.failed`;
    /// stops early when the reader is gone. With `since` (milliseconds
    /// since the Unix epoch) the read starts at the first record of that
    /// time or later, found by timestamp, and skips any older record after
    /// it; otherwise it starts at the beginning.
    func read(
        topic: String, partition: Int32, since: Int64? = nil, timeoutMilliseconds: Int32, into buffer: BoundedEventBuffer<RestoreEvent>
    ) {
        defer {
            _ = rd_kafka_consumer_close(handle.pointer)
            buffer.finish()
        }
        let rk = handle.pointer
        var low: Int64 = 0
        var high: Int64 = 0
        let error = rd_kafka_query_watermark_offsets(rk, topic, partition, &low, &high, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            buffer.push([
                .failed(
                    KafkaError(
                        code: .restore, message: "could not read the end offset of \(topic)[\(partition)]",
                        error: error))
            ])
            return
        }
        guard high > low else {
            buffer.push([.caughtUp(endOffset: high)])
            return
        }
        var start = Int64(RD_KAFKA_OFFSET_BEGINNING)
        // Records older than `since` are skipped even past the offset the
        // lookup found: Tansu answers it with the partition's first offset
        // for any time, and the mock cluster cannot look up by time at all.
        let notBefore = since
        if let since {
            switch offset(atTime: since, topic: topic, partition: partition, end: high, timeoutMilliseconds: timeoutMilliseconds) {
            case .failure(let failure):
                buffer.push([.failed(failure)])
                return
            case .success(let offset) where offset < high:
                start = offset
            case .success:
                // "No record that recent" is also what a broker that cannot
                // look up by time answers (librdkafka's mock cluster): the
                // last record's time tells which. When it is recent, the
                // partition is read from its beginning.
                guard let last = lastTimestamp(topic: topic, partition: partition, end: high, timeoutMilliseconds: timeoutMilliseconds),
                      last >= since
                else {
                    buffer.push([.caughtUp(endOffset: high)])
                    return
                }
            }
        }
        let list = RDKafkaPartitionList.make([TopicPartition(topic: topic, partition: partition)], offsets: [start])
        let assignError = rd_kafka_assign(rk, list)
        rd_kafka_topic_partition_list_destroy(list)
        guard assignError == RD_KAFKA_RESP_ERR_NO_ERROR else {
            buffer.push([
                .failed(
                    KafkaError(code: .restore, message: "could not assign \(topic)[\(partition)]", error: assignError))
            ])
            return
        }
        var topicNames = RDKafkaMessage.TopicNames()
        var pending: [KafkaRecord] = []
        var caughtUp = false
        var end = high
        let clock = ContinuousClock()
        let stallLimit = Duration.milliseconds(Int64(timeoutMilliseconds)) // not from a Double: an Int32 of milliseconds
        var lastProgress = clock.now
        while !caughtUp {
            if clock.now - lastProgress > stallLimit {
                let failure = KafkaError(
                    code: .restore,
                    message: "no progress reading \(topic)[\(partition)] for \(stallLimit); is the partition leader reachable?",
                    isRetryable: true)
                buffer.push(pending.isEmpty ? [.failed(failure)] : [.records(pending), .failed(failure)])
                return
            }
            if let message = rd_kafka_consumer_poll(rk, 100) {
                lastProgress = clock.now
                let raw = message.pointee
                switch raw.err {
                case RD_KAFKA_RESP_ERR_NO_ERROR:
                    // Records at or past `high` are taken too, and the end is the
                    // fetcher's end of partition, not `high`: some brokers (Tansu)
                    // answer ListOffsets with the last batch's base offset, which
                    // would leave that batch unread.
                    let record = RDKafkaMessage.record(from: message, topicNames: &topicNames)
                    if let notBefore, let time = record.timestampMilliseconds, time < notBefore { break }
                    pending.append(record)
                case RD_KAFKA_RESP_ERR__PARTITION_EOF:
                    caughtUp = raw.offset >= high
                    end = max(high, raw.offset)
                case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION,
                    RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR__FATAL:
                    let failure = KafkaError(
                        code: .restore, message: "could not read \(topic)[\(partition)]", error: raw.err)
                    rd_kafka_message_destroy(message)
                    buffer.push(pending.isEmpty ? [.failed(failure)] : [.records(pending), .failed(failure)])
                    return
                default:
                    logger.warning(
                        "Kafka restore read error",
                        metadata: [
                            "kafka.topic": "\(topic)", "kafka.partition": "\(partition)",
                            "kafka.error": "\(String(cString: rd_kafka_err2name(raw.err)))",
                        ])
                }
                rd_kafka_message_destroy(message)
                if pending.count < 1024 && !caughtUp { continue }
            }
            if !pending.isEmpty {
                guard buffer.push([.records(pending)]) else { return }
                pending = []
            }
        }
        buffer.push([.caughtUp(endOffset: end)])
    }
}

extension RDKafkaPartitionReader {
    /// Reads several partitions at once on this one client (blocking):
    /// `.records` ones from their beginning, every record pushed; `.endOffset`
    /// ones from their high watermark, only their end. Each ends with its
    /// `.caughtUp` at the fetcher's end of partition (records at or past
    /// the watermark are taken too: Tansu answers ListOffsets with the last
    /// batch's base offset); a failure pushes `.failure` and stops.
    func read(
        _ reads: [TopicPartition: PartitionRead], timeoutMilliseconds: Int32,
        into buffer: BoundedEventBuffer<Result<PartitionReadEvent, KafkaError>>
    ) {
        defer {
            _ = rd_kafka_consumer_close(handle.pointer)
            buffer.finish()
        }
        let rk = handle.pointer
        var highs: [TopicPartition: Int64] = [:]
        for partition in reads.keys {
            var low: Int64 = 0
            var high: Int64 = 0
            let error = rd_kafka_query_watermark_offsets(rk, partition.topic, partition.partition, &low, &high, timeoutMilliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                buffer.push([.failure(KafkaError(code: .restore, message: "could not read the end offset of \(partition)", error: error))])
                return
            }
            if high > low {
                highs[partition] = high
            } else {
                guard buffer.push([.success(.caughtUp(partition, endOffset: high))]) else { return }
            }
        }
        guard !highs.isEmpty else { return }
        let assigned = Array(highs.keys)
        let starts = assigned.map { reads[$0] == .records ? Int64(RD_KAFKA_OFFSET_BEGINNING) : highs[$0] ?? 0 }
        let list = RDKafkaPartitionList.make(assigned, offsets: starts)
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
                    code: .restore, message: "no progress reading \(Array(highs.keys)) for \(stallLimit); is the partition leader reachable?",
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
                if reads[partition] == .records {
                    pending[partition, default: []].append(RDKafkaMessage.record(from: message, topicNames: &topicNames))
                    pendingCount += 1
                }
            case RD_KAFKA_RESP_ERR__PARTITION_EOF:
                guard raw.offset >= high else { break }
                highs[partition] = nil
                let caughtUp = Result<PartitionReadEvent, KafkaError>.success(.caughtUp(partition, endOffset: max(ends[partition] ?? high, raw.offset)))
                guard flush([caughtUp]) else { return }
            default:
                logger.warning("Kafka restore read error", metadata: [
                    "kafka.topic": "\(partition.topic)", "kafka.partition": "\(partition.partition)",
                    "kafka.error": "\(String(cString: rd_kafka_err2name(raw.err)))",
                ])
            }
            if pendingCount >= 1024 {
                guard flush() else { return }
            }
        }
    }
}
