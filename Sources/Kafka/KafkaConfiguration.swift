import CRdKafka

/// What every Kafka client needs: where the cluster is, who we are, and any
/// raw librdkafka properties (`security.protocol`, `sasl.*`, `ssl.*`, …)
/// passed through unchanged. Raw properties are applied last, so they win
/// over the typed settings.
public struct KafkaClientConfiguration: Sendable {
    /// `bootstrap.servers`: `host:port` pairs.
    public var bootstrapServers: [String]
    /// `client.id`. Default `livedispatch`.
    public var clientID: String
    /// Whether the broker may create a topic the client asks about
    /// (`allow.auto.create.topics`). Default false: LiveDispatch creates its
    /// topics explicitly or refuses to start.
    public var allowAutoCreateTopics: Bool
    /// Raw librdkafka properties, applied after the typed ones.
    public var properties: [String: String]

    public init(
        bootstrapServers: [String], clientID: String = "livedispatch", allowAutoCreateTopics: Bool = false,
        properties: [String: String] = [:]
    ) {
        self.bootstrapServers = bootstrapServers
        self.clientID = clientID
        self.allowAutoCreateTopics = allowAutoCreateTopics
        self.properties = properties
    }

    /// Every librdkafka property this configuration sets, raw ones last.
    public var librdkafkaProperties: [String: String] {
        var properties = [
            "bootstrap.servers": bootstrapServers.joined(separator: ","),
            "client.id": clientID,
            "allow.auto.create.topics": allowAutoCreateTopics ? "true" : "false",
        ]
        properties.merge(self.properties) { _, raw in raw }
        return properties
    }
}

/// A producer's settings. Keyed records without an explicit partition are
/// placed with the Java client's murmur2 partitioner (`murmur2_random`).
public struct KafkaProducerConfiguration: Sendable {
    /// Acknowledgements the producer waits for.
    public enum Acknowledgements: String, Sendable {
        /// `acks=all`: every in-sync replica.
        case all = "all"
        /// `acks=1`: the leader only.
        case leader = "1"
    }

    /// `compression.type`: how the producer compresses its batches, on the
    /// wire and in the broker's log.
    public enum Compression: String, Sendable, CaseIterable {
        case none
        case lz4
        case zstd
        case gzip
        case snappy
    }

    public var client: KafkaClientConfiguration
    /// `linger.ms`: how long to wait to fill a batch. Default 5 ms.
    public var linger: Duration
    /// `batch.size` in bytes. Default 1 MB.
    public var batchSizeBytes: Int
    /// `batch.num.messages`. Default 10 000.
    public var batchRecords: Int
    /// `acks`. Default `.all`.
    public var acknowledgements: Acknowledgements
    /// `enable.idempotence`. Default false.
    public var idempotent: Bool
    /// `message.timeout.ms`: how long librdkafka retries a record before
    /// reporting its delivery failed. Default 120 s.
    public var deliveryTimeout: Duration
    /// `queue.buffering.max.messages`: records waiting for delivery before
    /// `send` waits for room. Default 100 000.
    public var maxQueuedRecords: Int
    /// `compression.type`. Default `.none`.
    public var compression: Compression
    /// Topics compressed otherwise than ``compression`` (raw properties do
    /// not change these).
    public var topicCompression: [String: Compression] = [:]

    public init(
        client: KafkaClientConfiguration, linger: Duration = .milliseconds(5), batchSizeBytes: Int = 1_000_000,
        batchRecords: Int = 10_000, acknowledgements: Acknowledgements = .all, idempotent: Bool = false,
        deliveryTimeout: Duration = .seconds(120), maxQueuedRecords: Int = 100_000, compression: Compression = .none
    ) {
        self.client = client
        self.linger = linger
        self.batchSizeBytes = batchSizeBytes
        self.batchRecords = batchRecords
        self.acknowledgements = acknowledgements
        self.idempotent = idempotent
        self.deliveryTimeout = deliveryTimeout
        self.maxQueuedRecords = maxQueuedRecords
        self.compression = compression
    }

    /// Every librdkafka property this configuration sets, raw ones last.
    public var librdkafkaProperties: [String: String] {
        var properties = client.librdkafkaProperties
        properties["linger.ms"] = String(linger.milliseconds)
        properties["batch.size"] = String(batchSizeBytes)
        properties["batch.num.messages"] = String(batchRecords)
        properties["acks"] = acknowledgements.rawValue
        properties["enable.idempotence"] = idempotent ? "true" : "false"
        properties["message.timeout.ms"] = String(deliveryTimeout.milliseconds)
        properties["queue.buffering.max.messages"] = String(maxQueuedRecords)
        properties["partitioner"] = "murmur2_random"
        properties["compression.type"] = compression.rawValue
        properties.merge(client.properties) { _, raw in raw }
        return properties
    }
}

/// A group consumer's settings. Offsets are never stored automatically
/// (`enable.auto.offset.store=false`): the application stores the offset of
/// each record it has finished with, and stored offsets are committed
/// periodically (``autoCommitInterval``), on ``KafkaConsumer/commit()``,
/// before partitions are revoked, and on close.
public struct KafkaConsumerConfiguration: Sendable {
    /// The group's partition assignment strategy.
    public enum AssignmentStrategy: String, Sendable {
        /// Incremental cooperative rebalancing: members keep their partitions
        /// while others join or leave.
        case cooperativeSticky = "cooperative-sticky"
        /// Eager range assignment (all partitions revoked on every rebalance).
        case range = "range"
        /// Eager round-robin assignment.
        case roundRobin = "roundrobin"
    }

    /// Where to start when the group has no committed offset for a partition.
    public enum OffsetReset: String, Sendable {
        case earliest
        case latest
    }

    public var client: KafkaClientConfiguration
    /// `group.id`.
    public var groupID: String
    /// `group.instance.id` for static membership; nil for dynamic membership.
    public var groupInstanceID: String?
    /// `session.timeout.ms`. Default 45 s.
    public var sessionTimeout: Duration
    /// `heartbeat.interval.ms`. Default 3 s.
    public var heartbeatInterval: Duration
    /// `max.poll.interval.ms`. Default 300 s.
    public var maxPollInterval: Duration
    /// `partition.assignment.strategy`. Default `.cooperativeSticky`.
    public var assignmentStrategy: AssignmentStrategy
    /// `auto.offset.reset`. Default `.earliest`.
    public var offsetReset: OffsetReset
    /// How often stored offsets are committed in the background
    /// (`auto.commit.interval.ms`); nil commits only when asked, on revoke and on close.
    /// Default 5 s.
    public var autoCommitInterval: Duration?
    /// Events buffered between the poll thread and Swift. When Swift falls
    /// this far behind, the poll thread waits. Default 10 000.
    public var eventBufferCapacity: Int

    public init(
        client: KafkaClientConfiguration, groupID: String, groupInstanceID: String? = nil,
        sessionTimeout: Duration = .seconds(45), heartbeatInterval: Duration = .seconds(3),
        maxPollInterval: Duration = .seconds(300), assignmentStrategy: AssignmentStrategy = .cooperativeSticky,
        offsetReset: OffsetReset = .earliest, autoCommitInterval: Duration? = .seconds(5),
        eventBufferCapacity: Int = 10_000
    ) {
        self.client = client
        self.groupID = groupID
        self.groupInstanceID = groupInstanceID
        self.sessionTimeout = sessionTimeout
        self.heartbeatInterval = heartbeatInterval
        self.maxPollInterval = maxPollInterval
        self.assignmentStrategy = assignmentStrategy
        self.offsetReset = offsetReset
        self.autoCommitInterval = autoCommitInterval
        self.eventBufferCapacity = eventBufferCapacity
    }

    /// Every librdkafka property this configuration sets, raw ones last.
    public var librdkafkaProperties: [String: String] {
        var properties = client.librdkafkaProperties
        if !client.allowAutoCreateTopics && client.properties["allow.auto.create.topics"] == nil {
            // Already librdkafka's consumer default; setting it explicitly makes
            // librdkafka warn on every metadata request to brokers older than 0.11.
            properties["allow.auto.create.topics"] = nil
        }
        properties["group.id"] = groupID
        if let groupInstanceID { properties["group.instance.id"] = groupInstanceID }
        properties["session.timeout.ms"] = String(sessionTimeout.milliseconds)
        properties["heartbeat.interval.ms"] = String(heartbeatInterval.milliseconds)
        properties["max.poll.interval.ms"] = String(maxPollInterval.milliseconds)
        properties["partition.assignment.strategy"] = assignmentStrategy.rawValue
        properties["auto.offset.reset"] = offsetReset.rawValue
        properties["enable.auto.offset.store"] = "false"
        if let autoCommitInterval {
            properties["enable.auto.commit"] = "true"
            properties["auto.commit.interval.ms"] = String(autoCommitInterval.milliseconds)
        } else {
            properties["enable.auto.commit"] = "false"
        }
        properties["enable.partition.eof"] = "false"
        properties.merge(KafkaPrefetch.properties) { _, prefetch in prefetch }
        properties.merge(client.properties) { _, raw in raw }
        return properties
    }
}

/// How far librdkafka fetches ahead of a consumer, unless the configuration's
/// raw properties say otherwise. Its defaults (100,000 records a partition,
/// 64 MB a consumer) made a worker that restored a million tokens, a reader
/// per partition at once, hold some 300 MB of fetched records at its peak;
/// records are handed on in batches of about a thousand, so a few batches
/// ahead keep the reads as fast (BENCHMARKS.md, "Fan-out"). 8,192 records or
/// 4 MB restore a million tokens as fast as 32,768 or 16 MB did (3.2 s) and
/// the restarting worker peaks 50 MB lower.
///
/// Once that much is queued, librdkafka (2.2 and later) waits
/// `fetch.queue.backoff.ms`, a second by default, before it fetches the
/// partition again, although a busy consumer drains the queue in a fraction
/// of that: it read a million-record partition at a fifth of the speed the
/// consumer could take. So the wait is 10 ms, where librdkafka knows the
/// property (older ones refuse it).
enum KafkaPrefetch {
    static let properties: [String: String] = {
        var properties = ["queued.min.messages": "8192", "queued.max.messages.kbytes": "4096"]
        if rd_kafka_version() >= 0x0202_0000 { properties["fetch.queue.backoff.ms"] = "10" }
        return properties
    }()
}

extension Duration {
    /// Whole milliseconds, rounded down, never negative.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
