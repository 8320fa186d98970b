/// One partition of one topic.
public struct TopicPartition: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public static func < (lhs: TopicPartition, rhs: TopicPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }

    public var description: String { "\(topic)[\(partition)]" }
}

/// A record header. Kafka allows several headers with one key and a null value.
public struct KafkaHeader: Hashable, Sendable {
    public var key: String
    /// The header's bytes; nil for a null header value.
    public var value: [UInt8]?

    public init(key: String, value: [UInt8]?) {
        self.key = key
        self.value = value
    }
}

/// A consumed record. A nil ``key`` is a record produced without a key; a nil
/// ``value`` is a tombstone (on compacted topics: delete the key).
public struct KafkaRecord: Hashable, Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]
    /// The record's timestamp in milliseconds since the Unix epoch, when it has one.
    public var timestampMilliseconds: Int64?

    public init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// The partition this record came from.
    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }

    /// Whether this record is a tombstone (null value).
    public var isTombstone: Bool { value == nil }
}

/// Where a produced record was stored.
public struct KafkaDeliveryReport: Hashable, Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64

    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// What a group consumer hands to Swift, in order. An `.assigned` event
/// always comes before any record of the partitions it names; records of a
/// partition handed out before its `.revoked` event are the last ones this
/// consumer delivers for it until it is assigned again.
public enum KafkaConsumerEvent: Hashable, Sendable {
    /// Partitions newly assigned to this member (incremental under cooperative rebalancing).
    case assigned([TopicPartition])
    /// Partitions taken away from this member (incremental under cooperative
    /// rebalancing). `lost` is true when the group moved on without this member
    /// (session timeout): offsets for them can no longer be committed.
    case revoked([TopicPartition], lost: Bool)
    /// A consumed record.
    case record(KafkaRecord)
}

/// An offset to commit for one partition: the offset of the NEXT record to
/// consume (last processed offset + 1), as Kafka defines committed offsets.
public struct KafkaCommitOffset: Hashable, Sendable {
    public var topicPartition: TopicPartition
    public var offset: Int64

    public init(topicPartition: TopicPartition, offset: Int64) {
        self.topicPartition = topicPartition
        self.offset = offset
    }
}
