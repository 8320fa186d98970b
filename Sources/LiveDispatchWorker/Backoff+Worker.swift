import LiveDispatchCore

extension Backoff {
    /// Between writes of one record that Kafka refused for now (router
    /// outputs, partition snapshots, token changes, dead letters): 0.4 s,
    /// doubling, at most 30 s. Retries of one partition keep their record
    /// order, so there is nothing to spread: no jitter.
    static let kafkaWrite = Backoff(base: 0.4, cap: 30, jitter: .none)

    /// Between attempts to restore a partition from its changelogs: 1 s,
    /// doubling, at most 30 s, without jitter.
    static let partitionRestore = Backoff(base: 1, cap: 30, jitter: .none)
}

extension Backoff {
    /// Between attempts to reach Kafka at start-up (a refused connection, a
    /// failed TLS handshake or SASL login): 1 s, doubling, at most 30 s.
    /// Each attempt itself waits up to 10 s for the brokers' metadata.
    static let kafkaStartup = Backoff(base: 1, cap: 30, jitter: .none)
}

extension Backoff {
    /// Between reads of the metadata of topics just created, which a
    /// broker can report late: 50 ms, doubling, at most 1 s.
    static let topicMetadata = Backoff(base: 0.05, cap: 1, jitter: .none)
}
