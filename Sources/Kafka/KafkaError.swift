/// Why a Kafka operation failed: a ``Code`` to switch on, a message that
/// says what to do, and librdkafka's own error name and text when the failure
/// came from librdkafka.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case configuration
            case clientCreation
            case produce
            case delivery
            case subscribe
            case assignment
            case offsetStore
            case commit
            case pause
            case metadata
            case topicCreation
            case restore
            case embeddedCluster
            case closed
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A property was rejected by librdkafka or by LiveDispatch.
        public static let configuration = Code(.configuration)
        /// librdkafka could not create a client handle.
        public static let clientCreation = Code(.clientCreation)
        /// A record could not be handed to librdkafka.
        public static let produce = Code(.produce)
        /// A record was accepted but its delivery failed.
        public static let delivery = Code(.delivery)
        /// Subscribing to topics failed.
        public static let subscribe = Code(.subscribe)
        /// Assigning or unassigning partitions failed.
        public static let assignment = Code(.assignment)
        /// Storing a consumed offset failed (typically: partition no longer assigned).
        public static let offsetStore = Code(.offsetStore)
        /// Committing offsets failed.
        public static let commit = Code(.commit)
        /// Pausing or resuming partitions failed.
        public static let pause = Code(.pause)
        /// Fetching cluster metadata failed.
        public static let metadata = Code(.metadata)
        /// Creating topics failed.
        public static let topicCreation = Code(.topicCreation)
        /// Reading a partition to its end failed.
        public static let restore = Code(.restore)
        /// The embedded mock cluster could not be created or controlled.
        public static let embeddedCluster = Code(.embeddedCluster)
        /// The client was already closed.
        public static let closed = Code(.closed)

        public var description: String {
            switch value {
            case .configuration: "configuration"
            case .clientCreation: "client-creation"
            case .produce: "produce"
            case .delivery: "delivery"
            case .subscribe: "subscribe"
            case .assignment: "assignment"
            case .offsetStore: "offset-store"
            case .commit: "commit"
            case .pause: "pause"
            case .metadata: "metadata"
            case .topicCreation: "topic-creation"
            case .restore: "restore"
            case .embeddedCluster: "embedded-cluster"
            case .closed: "closed"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong and what to do about it.
    public var message: String
    /// librdkafka's error name (`rd_kafka_err2name`, e.g. `_MSG_TIMED_OUT`), when librdkafka reported it.
    public var librdkafkaError: String?
    /// librdkafka's own human-readable error text, when librdkafka reported it.
    public var librdkafkaMessage: String?
    /// librdkafka's numeric error code (`rd_kafka_resp_err_t`), when librdkafka reported it.
    public var librdkafkaCode: Int32?
    /// Whether trying the same operation again later may succeed.
    public var isRetryable: Bool
    /// Whether the record itself is refused (too large, an invalid topic, an
    /// invalid record): producing the same record again can never succeed,
    /// so a caller must give up on it or change it rather than retry.
    public var isPermanent: Bool

    public init(
        code: Code, message: String, librdkafkaError: String? = nil, librdkafkaMessage: String? = nil,
        librdkafkaCode: Int32? = nil, isRetryable: Bool = false, isPermanent: Bool = false
    ) {
        self.code = code
        self.message = message
        self.librdkafkaError = librdkafkaError
        self.librdkafkaMessage = librdkafkaMessage
        self.librdkafkaCode = librdkafkaCode
        self.isRetryable = isRetryable
        self.isPermanent = isPermanent
    }

    public var description: String {
        var text = "kafka \(code): \(message)"
        if let librdkafkaError, let librdkafkaMessage {
            text += " (librdkafka \(librdkafkaError): \(librdkafkaMessage))"
        } else if let librdkafkaMessage {
            text += " (librdkafka: \(librdkafkaMessage))"
        }
        return text
    }
}
