import Crypto
import HTTPTypes
import LiveDispatchWorker

/// Who may call what: the configured API keys (by the SHA-256 of their
/// secret) and the scope each route needs. Pure lookups, no I/O.
struct APIKeyTable: Sendable {
    typealias Scope = WorkerConfiguration.APIScope

    enum Verdict: Sendable, Hashable {
        /// The route needs no key.
        case open
        /// The key named so may call the route.
        case allowed(key: String)
        case unauthorized(String)
        case forbidden(String)
    }

    private let keys: [String: WorkerConfiguration.APIKey]
    /// Whether the `read` routes answer requests without a key: a server
    /// bound to a loopback address is reached only from its own machine.
    let openReads: Bool

    init(_ keys: [WorkerConfiguration.APIKey], openReads: Bool = false) {
        self.keys = Dictionary(keys.map { ($0.sha256, $0) }, uniquingKeysWith: { first, _ in first })
        self.openReads = openReads
    }

    /// Whether `host` (of `admin.listen`) is reached only from this machine.
    static func isLoopback(host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.split(separator: ".", omittingEmptySubsequences: false).first == "127"
    }

    /// The scope a route needs, or nil for the open ones (health, metrics,
    /// status, the OpenAPI document) and for paths that are not routes.
    static func requiredScope(method: HTTPRequest.Method, path: String) -> Scope? {
        guard path.hasPrefix("/v1/"), path != "/v1/openapi.json" else { return nil }
        switch method {
        case .get, .head: return .read
        default:
            if path == "/v1/rules/explain" { return .read }
            return path.hasPrefix("/v1/activities/") || path == "/v1/tokens" || path.hasPrefix("/v1/tokens/") ? .ingest : .admin
        }
    }

    /// Checks `Authorization: Bearer <key>` against the route's scope.
    func authorize(_ authorization: String?, needs scope: Scope?) -> Verdict {
        guard let scope else { return .open }
        if scope == .read, openReads, authorization == nil { return .open }
        guard let authorization else {
            return .unauthorized("this route needs an API key with the \(scope.rawValue) scope: Authorization: Bearer <key>")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            return .unauthorized("expected Authorization: Bearer <key>")
        }
        let digest = SHA256.hash(data: Array(parts[1].utf8))
        let hex = digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        guard let key = keys[hex] else { return .unauthorized("the API key is not known to this worker") }
        guard key.scopes.contains(scope) else {
            return .forbidden("the API key \(key.name.debugDescription) lacks the \(scope.rawValue) scope this route needs")
        }
        return .allowed(key: key.name)
    }
}
