import CRdKafka
import Dispatch
import Logging
import Synchronization

/// State shared with librdkafka's callbacks, reached through the handle's
/// opaque pointer. It lives as long as the handle (the handle keeps it).
final class RDKafkaClientContext: Sendable {
    typealias RebalanceHandler = @Sendable (
        _ handle: OpaquePointer, _ error: rd_kafka_resp_err_t,
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) -> Void

    let logger: Logger
    /// Called from librdkafka's background thread after delivery reports were resolved.
    let deliveriesResolved: (@Sendable () -> Void)?
    /// Set once by a group consumer, before it subscribes; called on the poll thread.
    let rebalanceHandler = Mutex<RebalanceHandler?>(nil)
    /// The last connection failure librdkafka logged (facility `FAIL`: a
    /// refused connection, a TLS handshake or SASL authentication that
    /// failed), naming the broker; it tells why a request then timed out.
    let lastBrokerFailure = Mutex<String?>(nil)

    init(logger: Logger, deliveriesResolved: (@Sendable () -> Void)? = nil) {
        self.logger = logger
        self.deliveriesResolved = deliveriesResolved
    }

    static func from(_ opaque: UnsafeMutableRawPointer) -> RDKafkaClientContext {
        Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
    }
}

/// An `rd_kafka_t` handle.
///
/// `@unchecked Sendable` is safe: librdkafka documents its handle as
/// thread-safe for the calls made through it (produce, poll, commit,
/// pause, metadata), and the handle is destroyed exactly once, in `deinit`,
/// when no other reference to it can exist.
final class RDKafkaHandle: @unchecked Sendable {
    enum Kind {
        case producer
        case consumer
    }

    let pointer: OpaquePointer
    let context: RDKafkaClientContext

    /// Creates a handle from `properties`; `configure` may install callbacks on the configuration.
    init(
        kind: Kind, properties: [String: String], context: RDKafkaClientContext,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) {
        guard let configuration = rd_kafka_conf_new() else {
            throw KafkaError(code: .clientCreation, message: "librdkafka could not allocate a configuration")
        }
        var errorText = [CChar](repeating: 0, count: 512)
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            let result = rd_kafka_conf_set(configuration, name, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(configuration)
                throw KafkaError(
                    code: .configuration,
                    message: "librdkafka rejected the property '\(name)'; fix or remove it",
                    librdkafkaMessage: Self.string(errorText))
            }
        }
        rd_kafka_conf_set_opaque(configuration, Unmanaged.passUnretained(context).toOpaque())
        rd_kafka_conf_set_log_cb(configuration) { handle, level, facility, text in
            guard let handle, let opaque = rd_kafka_opaque(handle) else { return }
            let context = RDKafkaClientContext.from(opaque)
            let message = text.map { String(cString: $0) } ?? ""
            let facilityName = facility.map { String(cString: $0) } ?? ""
            if facilityName == "FAIL" {
                context.lastBrokerFailure.withLock { $0 = RDKafkaHandle.withoutThreadPrefix(message) }
            }
            let swiftLevel: Logger.Level =
                switch level {
                case ...3: .error
                case 4: .warning
                case 5, 6: .info
                default: .debug
                }
            context.logger.log(
                level: swiftLevel, "librdkafka log",
                metadata: ["kafka.facility": "\(facilityName)", "kafka.log": "\(message)"])
        }
        configure(configuration)
        let type: rd_kafka_type_t =
            switch kind {
            case .producer: RD_KAFKA_PRODUCER
            case .consumer: RD_KAFKA_CONSUMER
            }
        guard let handle = rd_kafka_new(type, configuration, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(configuration)
            throw KafkaError(
                code: .clientCreation, message: "librdkafka could not create a client; check the configuration",
                librdkafkaMessage: Self.string(errorText))
        }
        self.pointer = handle
        self.context = context
    }

    deinit {
        // rd_kafka_destroy joins librdkafka's threads: do it off the cooperative pool.
        let handle = UnsafeHandle(pointer: pointer)
        let context = self.context
        DedicatedThread.start(name: "rdkafka-destroy") {
            rd_kafka_destroy(handle.pointer)
            withExtendedLifetime(context) {}
        }
    }

    /// A log line without librdkafka's `[thrd:…]: ` prefix.
    static func withoutThreadPrefix(_ line: String) -> String {
        guard line.hasPrefix("[thrd:"), let end = line.range(of: "]: ") else { return line }
        return String(line[end.upperBound...])
    }

    static func string(_ buffer: [CChar]) -> String {
        buffer.withUnsafeBufferPointer { pointer in
            guard let base = pointer.baseAddress else { return "" }
            return String(cString: base)
        }
    }
}

/// A raw handle carried to the destroying thread; only that thread uses it.
private struct UnsafeHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

extension KafkaError {
    /// An error from a librdkafka response code, with librdkafka's name and text.
    init(code: Code, message: String, error: rd_kafka_resp_err_t, detail: String? = nil) {
        self.init(
            code: code, message: message,
            librdkafkaError: String(cString: rd_kafka_err2name(error)),
            librdkafkaMessage: detail ?? String(cString: rd_kafka_err2str(error)),
            librdkafkaCode: error.rawValue,
            isRetryable: Self.isRetryable(error),
            isPermanent: Self.isPermanent(error))
    }

    /// An error from an `rd_kafka_error_t`, which it destroys.
    init(code: Code, message: String, consuming error: OpaquePointer) {
        let responseError = rd_kafka_error_code(error)
        let detail = String(cString: rd_kafka_error_string(error))
        let retriable = rd_kafka_error_is_retriable(error) != 0
        rd_kafka_error_destroy(error)
        self.init(code: code, message: message, error: responseError, detail: detail)
        self.isRetryable = self.isRetryable || retriable
    }

    /// Errors about the record itself, which no retry can cure: the
    /// producer's or the broker's size limit, an invalid topic name, a
    /// record the broker's format checks refuse.
    static func isPermanent(_ error: rd_kafka_resp_err_t) -> Bool {
        switch error {
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
            RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE, RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION, RD_KAFKA_RESP_ERR_INVALID_RECORD,
            RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT, RD_KAFKA_RESP_ERR__INVALID_ARG:
            return true
        default:
            return false
        }
    }

    static func isRetryable(_ error: rd_kafka_resp_err_t) -> Bool {
        switch error {
        case RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT,
            RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__WAIT_COORD,
            RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
            return true
        default:
            return false
        }
    }
}

/// Conversions between Swift partition lists and `rd_kafka_topic_partition_list_t`.
enum RDKafkaPartitionList {
    struct Entry {
        var topicPartition: TopicPartition
        var offset: Int64
        var error: rd_kafka_resp_err_t
    }

    /// A new list (the caller destroys it) with the given offsets, or `RD_KAFKA_OFFSET_INVALID`.
    static func make(
        _ partitions: [TopicPartition], offsets: [Int64]? = nil
    ) -> UnsafeMutablePointer<rd_kafka_topic_partition_list_t> {
        // librdkafka aborts on allocation failure: the list is never NULL.
        let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t> = rd_kafka_topic_partition_list_new(
            Int32(max(1, partitions.count)))
        for (index, partition) in partitions.enumerated() {
            let element = rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)
            if let offsets, let element { element.pointee.offset = offsets[index] }
        }
        return list
    }

    static func read(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [Entry] {
        let count = Int(list.pointee.cnt)
        guard count > 0, let elements = list.pointee.elems else { return [] }
        return (0..<count).map { index in
            let element = elements[index]
            return Entry(
                topicPartition: TopicPartition(
                    topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition),
                offset: element.offset, error: element.err)
        }
    }

    /// Runs `body` with a temporary list.
    static func with<T>(
        _ partitions: [TopicPartition], offsets: [Int64]? = nil,
        _ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) throws(KafkaError) -> T
    ) throws(KafkaError) -> T {
        let list = make(partitions, offsets: offsets)
        defer { rd_kafka_topic_partition_list_destroy(list) }
        return try body(list)
    }
}
