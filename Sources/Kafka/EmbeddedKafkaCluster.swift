import Logging

/// A Kafka protocol API, for injecting errors into an ``EmbeddedKafkaCluster``.
public struct KafkaAPIKey: Hashable, Sendable {
    public var rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }

    public static let produce = KafkaAPIKey(rawValue: 0)
    public static let fetch = KafkaAPIKey(rawValue: 1)
    public static let listOffsets = KafkaAPIKey(rawValue: 2)
    public static let metadata = KafkaAPIKey(rawValue: 3)
    public static let offsetCommit = KafkaAPIKey(rawValue: 8)
    public static let offsetFetch = KafkaAPIKey(rawValue: 9)
    public static let findCoordinator = KafkaAPIKey(rawValue: 10)
    public static let joinGroup = KafkaAPIKey(rawValue: 11)
    public static let heartbeat = KafkaAPIKey(rawValue: 12)
    public static let syncGroup = KafkaAPIKey(rawValue: 14)
}

/// A Kafka protocol error code a broker answers with, for fault injection.
public struct KafkaProtocolError: Hashable, Sendable {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let unknownTopicOrPartition = KafkaProtocolError(rawValue: 3)
    public static let leaderNotAvailable = KafkaProtocolError(rawValue: 5)
    public static let notLeaderForPartition = KafkaProtocolError(rawValue: 6)
    public static let requestTimedOut = KafkaProtocolError(rawValue: 7)
    public static let coordinatorNotAvailable = KafkaProtocolError(rawValue: 15)
    public static let notCoordinator = KafkaProtocolError(rawValue: 16)
    public static let notEnoughReplicas = KafkaProtocolError(rawValue: 19)
    public static let rebalanceInProgress = KafkaProtocolError(rawValue: 27)
    /// A record larger than the broker's `max.message.bytes`.
    public static let messageTooLarge = KafkaProtocolError(rawValue: 10)
    /// An invalid topic name.
    public static let invalidTopic = KafkaProtocolError(rawValue: 17)
}

/// An in-process Kafka cluster (librdkafka's mock cluster) for tests, demos
/// and benchmarks: N brokers on ephemeral loopback ports, topics, and fault
/// controls. It stops when released.
public final class EmbeddedKafkaCluster: Sendable {
    private let cluster: RDKafkaMockCluster
    /// Broker ids, 1 through N.
    public let brokerIDs: [Int32]

    public init(brokers: Int = 3, logger: Logger = Logger(label: "livedispatch.kafka.embedded")) throws(KafkaError) {
        guard brokers >= 1 else {
            throw KafkaError(code: .embeddedCluster, message: "an embedded cluster needs at least one broker")
        }
        cluster = try RDKafkaMockCluster(brokers: brokers, logger: logger)
        brokerIDs = (1...brokers).map { Int32($0) }
    }

    /// `host:port,host:port,…` for clients' `bootstrap.servers`.
    public var bootstrapServers: String { cluster.bootstrapServers }

    /// A client configuration pointing at this cluster.
    public func clientConfiguration(clientID: String = "livedispatch") -> KafkaClientConfiguration {
        KafkaClientConfiguration(bootstrapServers: [bootstrapServers], clientID: clientID)
    }

    /// Creates a topic with `partitions` partitions.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        try cluster.createTopic(name, partitions: partitions, replicationFactor: replicationFactor)
    }

    /// Takes a broker down: its connections are closed and new ones refused.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try cluster.setBroker(id, up: false)
    }

    /// Brings a broker back up.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try cluster.setBroker(id, up: true)
    }

    /// Delays every response of broker `id` by `roundTripTime`.
    public func setRoundTripTime(_ roundTripTime: Duration, broker id: Int32) throws(KafkaError) {
        try cluster.setRoundTripTime(broker: id, milliseconds: Int32(clamping: roundTripTime.milliseconds))
    }

    /// Makes the next requests of `api` (to any broker) fail with `errors`, one per request, in order.
    public func pushRequestErrors(_ api: KafkaAPIKey, _ errors: [KafkaProtocolError]) {
        cluster.pushRequestErrors(apiKey: api.rawValue, errors: errors.map(\.rawValue))
    }

    /// Drops the errors still queued for `api`.
    public func clearRequestErrors(_ api: KafkaAPIKey) {
        cluster.clearRequestErrors(apiKey: api.rawValue)
    }
}
