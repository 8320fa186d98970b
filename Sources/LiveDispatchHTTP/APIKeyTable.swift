import Crypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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

    /// Whether `host` names this machine only: `localhost` (any case, an
    /// optional final dot), an IPv4 address of 127.0.0.0/8 in dotted-quad
    /// form, or the IPv6 loopback `::1` (bracketed or not, in any spelling
    /// `inet_pton` reads). `127.example.com` is not loopback.
    static func isLoopback(host: String) -> Bool {
        var name = host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        if name.lowercased() == "localhost" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        if octets.count == 4, octets.allSatisfy({ (1...3).contains($0.count) && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) {
            return octets[0] == "127" && octets.allSatisfy { (Int($0) ?? 256) <= 255 }
        }
        return isIPv6Loopback(name)
    }

    /// Whether `text` is an IPv6 address (as `inet_pton` reads it) equal to `::1`.
    static func isIPv6Loopback(_ text: String) -> Bool {
        guard text.contains(":"), !text.utf8.contains(0) else { return false }
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return false }
        return withUnsafeBytes(of: &address) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }

    /// The host name of a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`), or nil when it is malformed.
    static func hostName(ofHeader header: String) -> String? {
        if header.hasPrefix("[") {
            guard let close = header.firstIndex(of: "]") else { return nil }
            let rest = header[header.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            return String(header[...close])
        }
        let parts = header.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty else { return nil }
        if parts.count == 2, !parts[1].allSatisfy(\.isNumber) { return nil }
        return String(parts[0])
    }

    /// The scopes of the key named so (none for a name no key has).
    func scopes(ofKey name: String) -> Set<Scope> {
        keys.values.first { $0.name == name }?.scopes ?? []
    }

    /// Lowercase hex SHA-256, as `http.api_keys` gives each key.
    static func sha256Hex(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Checks `Authorization: Bearer <key>` against the route's scope. On a
    /// server bound to loopback a read without a key is open, but only when
    /// the request's `Host` names loopback too: a page that rebinds its own
    /// DNS name to 127.0.0.1 sends its own name, and is refused.
    func authorize(_ authorization: String?, needs scope: Scope, host: String? = nil) -> Verdict {
        if scope == .read, openReads, authorization == nil {
            if let host, let name = Self.hostName(ofHeader: host), Self.isLoopback(host: name) { return .open }
            return .unauthorized(
                "reads without a key are answered only to a loopback Host (localhost, 127.0.0.1, [::1]); got Host \((host ?? "").debugDescription): "
                    + "send Authorization: Bearer <key> with the read scope")
        }
        guard let authorization else {
            return .unauthorized("this route needs an API key with the \(scope.rawValue) scope: Authorization: Bearer <key>")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            return .unauthorized("expected Authorization: Bearer <key>")
        }
        guard let key = keys[Self.sha256Hex(Array(parts[1].utf8))] else { return .unauthorized("the API key is not known to this worker") }
        guard key.scopes.contains(scope) else {
            return .forbidden("the API key \(key.name.debugDescription) lacks the \(scope.rawValue) scope this route needs")
        }
        return .allowed(key: key.name)
    }
}
