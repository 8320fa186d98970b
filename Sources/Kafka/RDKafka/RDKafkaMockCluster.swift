import CRdKafka
import Logging

/// librdkafka's in-process mock cluster (`rd_kafka_mock_cluster_new`),
/// living inside a producer handle of its own.
///
/// `@unchecked Sendable` is safe: every `rd_kafka_mock_*` call used here
/// posts an operation to the mock cluster's own thread and waits for it,
/// so calls from any thread are serialised by librdkafka; the cluster and
/// its handle are destroyed exactly once, in `deinit`.
final class RDKafkaMockCluster: @unchecked Sendable {
    private let handle: RDKafkaHandle
    private let cluster: OpaquePointer
    let bootstrapServers: String

    init(brokers: Int, logger: Logger) throws(KafkaError) {
        handle = try RDKafkaHandle(
            kind: .producer, properties: ["log_level": "3"], context: RDKafkaClientContext(logger: logger))
        guard let cluster = rd_kafka_mock_cluster_new(handle.pointer, Int32(brokers)) else {
            throw KafkaError(code: .embeddedCluster, message: "librdkafka could not start a mock cluster of \(brokers) brokers")
        }
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    func createTopic(_ name: String, partitions: Int, replicationFactor: Int) throws(KafkaError) {
        try check(
            rd_kafka_mock_topic_create(cluster, name, Int32(partitions), Int32(replicationFactor)),
            "could not create topic '\(name)' with \(partitions) partitions")
    }

    func setBroker(_ id: Int32, up: Bool) throws(KafkaError) {
        let error = up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id)
        try check(error, "could not set broker \(id) \(up ? "up" : "down")")
    }

    func setRoundTripTime(broker: Int32, milliseconds: Int32) throws(KafkaError) {
        try check(rd_kafka_mock_broker_set_rtt(cluster, broker, milliseconds), "could not set the RTT of broker \(broker)")
    }

    func pushRequestErrors(apiKey: Int16, errors: [Int32]) {
        var codes = errors.map { rd_kafka_resp_err_t(rawValue: $0) }
        let count = codes.count
        codes.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, count, buffer.baseAddress)
        }
    }

    func clearRequestErrors(apiKey: Int16) {
        rd_kafka_mock_clear_request_errors(cluster, apiKey)
    }

    private func check(_ error: rd_kafka_resp_err_t, _ message: String) throws(KafkaError) {
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(code: .embeddedCluster, message: message, error: error)
        }
    }

    deinit {
        // Destroying the cluster joins its thread: do it off the cooperative pool,
        // before the handle it lives in goes away.
        let cluster = MockClusterPointer(pointer: cluster)
        let handle = self.handle
        DedicatedThread.start(name: "rdkafka-mock-destroy") {
            rd_kafka_mock_cluster_destroy(cluster.pointer)
            withExtendedLifetime(handle) {}
        }
    }
}

/// The raw cluster pointer carried to the destroying thread; only that thread uses it.
private struct MockClusterPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}
