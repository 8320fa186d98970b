import CRdKafka

/// librdkafka's clients as a whole.
public enum KafkaClients {
    /// Waits until every librdkafka client this process made is destroyed,
    /// its threads joined; false when some are still open at `timeout`.
    ///
    /// A client is destroyed on its own thread once its last owner lets go
    /// of it. A process that exits before then runs OpenSSL's exit handler
    /// under that client's broker threads, which can crash on a TLS
    /// connection: wait for this before returning from `main`.
    public static func waitUntilDestroyed(timeout: Duration) async -> Bool {
        let milliseconds = Int32(clamping: timeout.milliseconds)
        return await DedicatedThread.run(name: "rdkafka-wait-destroyed") { rd_kafka_wait_destroyed(milliseconds) == 0 }
    }
}
