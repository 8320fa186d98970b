/// `LIVEDISPATCH_*` overrides that point the shipped `Config/livedispatch.yaml`
/// at a test broker, as an installation's environment does: the group, the
/// partition count, the admin endpoint on loopback, a quick coalescing
/// window, group timeouts fit for a test and the short fetch wait the test
/// brokers need (they hold an empty fetch for its whole wait).
func shippedConfigurationOverrides(bootstrap: String, group: String, partitions: Int, adminPort: Int) -> [String: String] {
    [
        "LIVEDISPATCH_KAFKA_BOOTSTRAP": bootstrap,
        "LIVEDISPATCH_KAFKA_GROUP_ID": group,
        "LIVEDISPATCH_KAFKA_PARTITIONS": String(partitions),
        "LIVEDISPATCH_KAFKA_PROPERTIES_SESSION_TIMEOUT_MS": "6000",
        "LIVEDISPATCH_KAFKA_PROPERTIES_HEARTBEAT_INTERVAL_MS": "300",
        "LIVEDISPATCH_KAFKA_PROPERTIES_FETCH_WAIT_MAX_MS": "10",
        "LIVEDISPATCH_ADMIN_LISTEN": "127.0.0.1:\(adminPort)",
        "LIVEDISPATCH_COALESCE_WINDOW": "100ms",
        "LIVEDISPATCH_COALESCE_MAX_DELAY": "500ms",
        "LIVEDISPATCH_SHUTDOWN_TIMEOUT": "10s",
        "LIVEDISPATCH_LOG_LEVEL": "info",
    ]
}
