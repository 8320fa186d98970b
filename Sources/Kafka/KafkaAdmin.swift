import Logging

/// A topic to create.
public struct KafkaTopicSpecification: Hashable, Sendable {
    public var name: String
    public var partitions: Int
    public var replicationFactor: Int
    /// Topic configs such as `cleanup.policy: compact`.
    public var config: [String: String]

    public init(name: String, partitions: Int, replicationFactor: Int = 1, config: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.config = config
    }
}

/// Cluster metadata and topic creation. Every call runs on a dedicated thread.
public final class KafkaAdmin: Sendable {
    private let client: RDKafkaAdminClient

    public init(configuration: KafkaClientConfiguration, logger: Logger) throws(KafkaError) {
        let properties = configuration.librdkafkaProperties
        client = try RDKafkaAdminClient(properties: properties, logger: logger)
    }

    /// Every topic the cluster knows, with its partition count.
    public func partitionCounts(timeout: Duration = .seconds(10)) async throws(KafkaError) -> [String: Int] {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.milliseconds)
        return try await DedicatedThread.run(name: "kafka-metadata") { () -> Result<[String: Int], KafkaError> in
            Result { () throws(KafkaError) in try client.partitionCounts(timeoutMilliseconds: milliseconds) }
        }.get()
    }

    /// The partition count of `topic`, or nil when the cluster does not have it.
    public func partitionCount(topic: String, timeout: Duration = .seconds(10)) async throws(KafkaError) -> Int? {
        try await partitionCounts(timeout: timeout)[topic]
    }

    /// Checks that co-partitioned `topics` all exist with one partition count
    /// and returns it; otherwise throws an error naming every topic and its count.
    public func requireSamePartitionCount(_ topics: [String], timeout: Duration = .seconds(10)) async throws(KafkaError)
        -> Int
    {
        let counts = try await partitionCounts(timeout: timeout)
        let found = topics.map { (topic: $0, count: counts[$0]) }
        let distinct = Set(found.compactMap(\.count))
        if found.allSatisfy({ $0.count != nil }), distinct.count == 1, let count = distinct.first {
            return count
        }
        let listing = found.map { "\($0.topic): \($0.count.map(String.init) ?? "missing")" }.joined(separator: ", ")
        throw KafkaError(
            code: .metadata,
            message: "these topics must exist with the same number of partitions (\(listing)); create or repartition them")
    }

    /// Creates the topics that do not exist yet; returns the names it created.
    @discardableResult
    public func createTopics(
        _ topics: [KafkaTopicSpecification], timeout: Duration = .seconds(30)
    ) async throws(KafkaError) -> [String] {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.milliseconds)
        return try await DedicatedThread.run(name: "kafka-create-topics") { () -> Result<[String], KafkaError> in
            Result { () throws(KafkaError) in try client.createTopics(topics, timeoutMilliseconds: milliseconds) }
        }.get()
    }
}
