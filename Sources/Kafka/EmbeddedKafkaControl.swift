/// One line of the control protocol of `livedispatch kafka embedded --control`:
/// a fault to inject into an ``EmbeddedKafkaCluster`` from another process.
///
///     broker-down ID            take broker ID down (connections closed, new ones refused)
///     broker-up ID              bring it back
///     errors API CODE COUNT     the next COUNT requests of API fail with Kafka error CODE
///     clear-errors API          drop the errors still queued for API
///
/// API is one of ``EmbeddedKafkaControl/apiNames``' keys; CODE a Kafka
/// protocol error code (1 to 200).
public enum EmbeddedKafkaControl: Sendable, Hashable {
    case brokerDown(Int32)
    case brokerUp(Int32)
    case requestErrors(KafkaAPIKey, KafkaProtocolError, count: Int)
    case clearRequestErrors(KafkaAPIKey)

    public static let apiNames: [String: KafkaAPIKey] = [
        "produce": .produce, "fetch": .fetch, "list-offsets": .listOffsets, "metadata": .metadata,
        "offset-commit": .offsetCommit, "offset-fetch": .offsetFetch, "find-coordinator": .findCoordinator,
        "join-group": .joinGroup, "heartbeat": .heartbeat, "sync-group": .syncGroup,
    ]

    /// Most errors one `errors` line may queue.
    public static let maxErrorCount = 10_000

    /// Parses one line; the error says what is wrong with it.
    public init(parsing line: String) throws(EmbeddedKafkaControlError) {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let verb = words.first else { throw EmbeddedKafkaControlError("empty command") }
        func arguments(_ count: Int, _ usage: String) throws(EmbeddedKafkaControlError) {
            guard words.count == count + 1 else { throw EmbeddedKafkaControlError("usage: \(usage)") }
        }
        func api(_ word: String) throws(EmbeddedKafkaControlError) -> KafkaAPIKey {
            guard let api = Self.apiNames[word] else {
                throw EmbeddedKafkaControlError("unknown API '\(word.prefix(40))'; one of \(Self.apiNames.keys.sorted().joined(separator: ", "))")
            }
            return api
        }
        func number(_ word: String, _ name: String, _ range: ClosedRange<Int>) throws(EmbeddedKafkaControlError) -> Int {
            guard let value = Int(word), range.contains(value) else {
                throw EmbeddedKafkaControlError("\(name) '\(word.prefix(40))' is not a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        switch verb {
        case "broker-down", "broker-up":
            try arguments(1, "\(verb) BROKER-ID")
            let id = Int32(try number(words[1], "broker id", 1...1_000))
            self = verb == "broker-down" ? .brokerDown(id) : .brokerUp(id)
        case "errors":
            try arguments(3, "errors API CODE COUNT")
            let code = try number(words[2], "error code", 1...200)
            let count = try number(words[3], "count", 1...Self.maxErrorCount)
            self = .requestErrors(try api(words[1]), KafkaProtocolError(rawValue: Int32(code)), count: count)
        case "clear-errors":
            try arguments(1, "clear-errors API")
            self = .clearRequestErrors(try api(words[1]))
        default:
            throw EmbeddedKafkaControlError("unknown command '\(verb.prefix(40))'; one of broker-down, broker-up, errors, clear-errors")
        }
    }

    /// Applies the command to `cluster`.
    public func apply(to cluster: EmbeddedKafkaCluster) throws(KafkaError) {
        switch self {
        case .brokerDown(let id): try cluster.setBrokerDown(id)
        case .brokerUp(let id): try cluster.setBrokerUp(id)
        case .requestErrors(let api, let error, let count):
            cluster.pushRequestErrors(api, Array(repeating: error, count: count))
        case .clearRequestErrors(let api): cluster.clearRequestErrors(api)
        }
    }
}

/// A control line that could not be understood.
public struct EmbeddedKafkaControlError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
