import Yams

extension WorkerConfiguration {
    /// The worker's HTTP server (`admin.listen`): its limits and the API keys
    /// of the ingest API.
    public struct HTTP: Sendable, Hashable {
        /// A connection that sends nothing for this long is closed.
        public var idleTimeout: Double = 60
        /// Time allowed for a request's head (line and headers) to arrive,
        /// counted from the connection's start or the end of the previous response.
        public var headerTimeout: Double = 10
        /// Time allowed for a request's body to arrive after its head.
        public var requestTimeout: Double = 30
        /// Connections served at once; more wait in the listen backlog
        /// until one closes, so they cannot exhaust the process's file descriptors.
        public var maxConnections = 512
        /// Connections one client address may hold at once (as nginx's
        /// `limit_conn`); more from it are closed as soon as they open.
        public var maxConnectionsPerAddress = 64
        /// Largest request body accepted, in bytes; larger ones get 413.
        public var maxBodyBytes = 256 * 1024
        /// Requests per second each API key may make, on average.
        public var rateLimit = 100
        /// Requests an API key may make at once after being quiet.
        public var rateBurst = 200
        /// The keys that may call the API; empty refuses every write.
        public var apiKeys: [APIKey] = []
        /// What one `POST /v1/rules/diff` may cost a key with the `read`
        /// scope only (and a keyless loopback read).
        public var rulesDiffRead = RulesDiffBudget(events: 200_000, seconds: 10)
        /// What one `POST /v1/rules/diff` may cost a key with the `admin` scope.
        public var rulesDiffAdmin = RulesDiffBudget(events: 1_000_000, seconds: 60)
    }

    /// The most one rules diff may do: events read and evaluated by both
    /// rule sets, and seconds. A run that reaches either stops there and
    /// answers with what it has, marked cut.
    public struct RulesDiffBudget: Sendable, Hashable {
        public var events: Int
        public var seconds: Double

        public init(events: Int, seconds: Double) {
            self.events = events
            self.seconds = seconds
        }
    }

    /// What an API key may do.
    public enum APIScope: String, Sendable, Hashable, CaseIterable, Comparable {
        /// Start, update and end activities; register and unregister tokens.
        case ingest
        /// Read activities, dead letters and rules.
        case read
        /// Operator actions (replays).
        case admin

        public static func < (lhs: APIScope, rhs: APIScope) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// An API key as configured: only the SHA-256 of the secret is stored.
    public struct APIKey: Sendable, Hashable {
        /// Names the key in logs and metrics.
        public var name: String
        /// Lowercase hex SHA-256 of the key the client sends as `Authorization: Bearer <key>`.
        public var sha256: String
        public var scopes: Set<APIScope>

        public init(name: String, sha256: String, scopes: Set<APIScope>) {
            self.name = name
            self.sha256 = sha256
            self.scopes = scopes
        }
    }
}

extension ConfigurationLoader {
    /// Reads `http.api_keys`: a list of `{name, sha256, scopes}` mappings.
    mutating func parseAPIKeys(_ node: Node, key: String) -> ConfigurationValue? {
        if case .scalar = node, node.null != nil { return .apiKeys([]) }
        guard case .sequence(let items) = node else {
            problems.append(.init(location: location(node), key: key, message: "expected a list of keys, each with name, sha256 and scopes"))
            return nil
        }
        var keys: [WorkerConfiguration.APIKey] = []
        var failed = false
        func fail(_ node: Node, _ message: String) {
            problems.append(.init(location: location(node), key: key, message: message))
            failed = true
        }
        for item in items {
            guard case .mapping(let fields) = item else {
                fail(item, "expected a mapping with name, sha256 and scopes")
                continue
            }
            let problemsBefore = problems.count
            var name: String?
            var hash: String?
            var scopes: Set<WorkerConfiguration.APIScope>?
            for (fieldKey, value) in fields {
                switch fieldKey.string ?? "" {
                case "name":
                    guard case .scalar(let scalar) = value, !scalar.string.isEmpty else { fail(value, "name: expected a non-empty name"); continue }
                    name = scalar.string
                case "sha256":
                    let text: String
                    if case .scalar(let scalar) = value { text = scalar.string.lowercased() } else { text = "" }
                    guard text.utf8.count == 64, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                        fail(value, "sha256: expected the key's SHA-256 as 64 hex digits (`printf %s KEY | sha256sum`)")
                        continue
                    }
                    hash = text
                case "scopes":
                    guard case .sequence(let scopeNodes) = value, !scopeNodes.isEmpty else {
                        fail(value, "scopes: expected a list of one or more of \(WorkerConfiguration.APIScope.allCases.map(\.rawValue).joined(separator: ", "))")
                        continue
                    }
                    var parsed: Set<WorkerConfiguration.APIScope> = []
                    for scopeNode in scopeNodes {
                        guard let scope = scopeNode.string.flatMap(WorkerConfiguration.APIScope.init(rawValue:)) else {
                            fail(scopeNode, "scopes: \((scopeNode.string ?? "").debugDescription) is not a scope (expected \(WorkerConfiguration.APIScope.allCases.map(\.rawValue).joined(separator: ", ")))")
                            continue
                        }
                        parsed.insert(scope)
                    }
                    scopes = parsed
                default:
                    fail(fieldKey, "unknown field \((fieldKey.string ?? "").debugDescription) (expected name, sha256, scopes)")
                }
            }
            guard let name, let hash, let scopes else {
                if problems.count == problemsBefore {
                    let missing = [("name", name == nil), ("sha256", hash == nil), ("scopes", scopes == nil)].filter { $0.1 }.map { $0.0 }
                    fail(item, "the key has no \(missing.joined(separator: ", ")) (each key needs name, sha256 and scopes)")
                }
                continue
            }
            if keys.contains(where: { $0.name == name }) { fail(item, "the name \(name.debugDescription) is used by two keys") }
            if keys.contains(where: { $0.sha256 == hash }) { fail(item, "two keys have the same sha256") }
            keys.append(.init(name: name, sha256: hash, scopes: scopes))
        }
        return failed ? nil : .apiKeys(keys)
    }
}
