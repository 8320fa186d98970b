import CRdKafka
import Logging

/// Metadata and topic administration through a producer-type handle.
final class RDKafkaAdminClient: Sendable {
    let handle: RDKafkaHandle

    init(properties: [String: String], logger: Logger) throws(KafkaError) {
        handle = try RDKafkaHandle(kind: .producer, properties: properties, context: RDKafkaClientContext(logger: logger))
    }

    /// `message` with the last connection failure librdkafka logged, which
    /// says why a request went unanswered (a certificate that did not
    /// verify, a refused login).
    private func explained(_ message: String) -> String {
        guard let failure = handle.context.lastBrokerFailure.withLock({ $0 }) else { return message }
        return "\(message); the last connection failure: \(failure)"
    }

    /// Partition counts of every topic the cluster reports (blocking).
    func partitionCounts(timeoutMilliseconds: Int32) throws(KafkaError) -> [String: Int] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let error = rd_kafka_metadata(handle.pointer, 1, nil, &metadata, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(
                code: .metadata, message: explained("could not fetch cluster metadata; check bootstrap servers and connectivity"),
                error: error)
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        var counts: [String: Int] = [:]
        let topicCount = Int(metadata.pointee.topic_cnt)
        if topicCount > 0, let topics = metadata.pointee.topics {
            for index in 0..<topicCount {
                let topic = topics[index]
                guard topic.err == RD_KAFKA_RESP_ERR_NO_ERROR, let name = topic.topic else { continue }
                counts[String(cString: name)] = Int(topic.partition_cnt)
            }
        }
        return counts
    }

    /// Creates topics (blocking); topics that already exist are not an error.
    func createTopics(
        _ topics: [KafkaTopicSpecification], timeoutMilliseconds: Int32
    ) throws(KafkaError) -> [String] {
        guard !topics.isEmpty else { return [] }
        var errorText = [CChar](repeating: 0, count: 512)
        var newTopics: [OpaquePointer?] = []
        defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
        for topic in topics {
            guard
                let newTopic = rd_kafka_NewTopic_new(
                    topic.name, Int32(topic.partitions), Int32(topic.replicationFactor), &errorText, errorText.count)
            else {
                throw KafkaError(
                    code: .topicCreation, message: "invalid topic specification for '\(topic.name)'",
                    librdkafkaMessage: RDKafkaHandle.string(errorText))
            }
            newTopics.append(newTopic)
            for (name, value) in topic.config.sorted(by: { $0.key < $1.key }) {
                let error = rd_kafka_NewTopic_set_config(newTopic, name, value)
                if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                    throw KafkaError(
                        code: .topicCreation, message: "invalid config '\(name)' for topic '\(topic.name)'",
                        error: error)
                }
            }
        }
        guard let queue = rd_kafka_queue_new(handle.pointer) else {
            throw KafkaError(code: .topicCreation, message: "librdkafka could not create a result queue")
        }
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle.pointer, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        _ = rd_kafka_AdminOptions_set_request_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(handle.pointer, buffer.baseAddress, buffer.count, options, queue)
        }
        guard let event = rd_kafka_queue_poll(queue, timeoutMilliseconds + 5000) else {
            throw KafkaError(
                code: .topicCreation, message: explained("no answer to the topic creation request in time"), isRetryable: true)
        }
        defer { rd_kafka_event_destroy(event) }
        let eventError = rd_kafka_event_error(event)
        if eventError != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(
                code: .topicCreation, message: explained("the topic creation request failed"), error: eventError,
                detail: rd_kafka_event_error_string(event).map { String(cString: $0) })
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else {
            throw KafkaError(code: .topicCreation, message: "librdkafka returned no topic creation result")
        }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return [] }
        var created: [String] = []
        for index in 0..<count {
            guard let topicResult = results[index] else { continue }
            let name = String(cString: rd_kafka_topic_result_name(topicResult))
            let error = rd_kafka_topic_result_error(topicResult)
            switch error {
            case RD_KAFKA_RESP_ERR_NO_ERROR:
                created.append(name)
            case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
                continue
            default:
                throw KafkaError(
                    code: .topicCreation, message: "could not create topic '\(name)'", error: error,
                    detail: rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) })
            }
        }
        return created
    }
}
