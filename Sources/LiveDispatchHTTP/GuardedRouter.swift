import Foundation
import HTTPTypes
import Hummingbird
import LiveDispatchCore
import LiveDispatchWorker
import OpenAPIHummingbird
import OpenAPIRuntime
import Synchronization

/// What a route needs before its handler runs.
enum RouteAccess: Sendable, Hashable, CustomStringConvertible {
    /// Nothing: health, readiness, metrics, status, the console's files, the OpenAPI document.
    case open
    /// An API key with this scope (a keyless read on loopback, see ``APIKeyTable/authorize(_:needs:host:)``).
    case key(WorkerConfiguration.APIScope)

    var description: String {
        switch self {
        case .open: "open"
        case .key(let scope): scope.rawValue
        }
    }
}

/// One route as registered: its method, its path template and what it needs.
struct RegisteredRoute: Sendable, Hashable, CustomStringConvertible {
    var method: HTTPRequest.Method
    var path: String
    var access: RouteAccess

    var description: String { "\(method.rawValue) \(path) (\(access))" }
}

/// A route of the OpenAPI document that declares no scope, or declares one
/// the worker does not know: the server refuses to start rather than guess.
struct UndeclaredRouteAccess: Error, CustomStringConvertible {
    var method: String
    var path: String
    var description: String {
        "\(method) \(path): openapi.yaml gives this operation no `security: - bearer: [scope]` with one of ingest, read or admin"
    }
}

/// The worker's router, through which every route is registered together
/// with the access it needs, and whose handlers check that access
/// themselves: the check belongs to the route the router matched, so no
/// spelling of a path can reach a handler without it, and a path that
/// matches no route runs no handler at all (404).
///
/// The ingest API's operations take their scope from the `security` of
/// their operation in `openapi.yaml` (the document the worker serves); an
/// operation without one stops the server from starting.
final class GuardedRouter: ServerTransport {
    let router: Hummingbird.Router<BasicRequestContext>
    let gate: AccessGate
    /// The scope each operation of the OpenAPI document declares, by method and path template.
    private let declared: [String: WorkerConfiguration.APIScope]
    private(set) var routes: [RegisteredRoute] = []

    init(router: Hummingbird.Router<BasicRequestContext>, gate: AccessGate, document: String = OpenAPIDocument.json) throws {
        self.router = router
        self.gate = gate
        declared = try Self.declaredScopes(document)
    }

    /// A route anyone may call.
    func open(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping @Sendable (Request, BasicRequestContext) async throws -> Response) {
        routes.append(.init(method: method, path: path, access: .open))
        router.on(RouterPath(path), method: method, use: handler)
    }

    /// A route of the generated server: called by `registerHandlers(on:)`.
    func register(
        _ handler: @escaping @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        guard let scope = declared[Self.routeKey(method, path)] else { throw UndeclaredRouteAccess(method: method.rawValue, path: path) }
        let access = RouteAccess.key(scope)
        routes.append(.init(method: method, path: path, access: access))
        let gate = gate
        router.register(
            { request, body, metadata in
                if let refusal = gate.refusal(for: request, access: access) { return refusal.openAPIResponse() }
                return try await handler(request, body, metadata)
            }, method: method, path: path)
    }

    static func routeKey(_ method: HTTPRequest.Method, _ path: String) -> String { method.rawValue + " " + path }

    /// Each operation's scope, from `paths.<path>.<method>.security[0].bearer[0]`.
    static func declaredScopes(_ document: String) throws -> [String: WorkerConfiguration.APIScope] {
        let json = try JSONValue.parse(document)
        var scopes: [String: WorkerConfiguration.APIScope] = [:]
        for (path, item) in json["paths"]?.objectValue ?? [:] {
            for (method, operation) in item.objectValue ?? [:] {
                guard let name = operation["security"]?.arrayValue?.first?["bearer"]?.arrayValue?.first?.stringValue,
                    let scope = WorkerConfiguration.APIScope(rawValue: name)
                else { throw UndeclaredRouteAccess(method: method.uppercased(), path: path) }
                scopes[routeKey(HTTPRequest.Method(method.uppercased()) ?? .get, path)] = scope
            }
        }
        return scopes
    }
}

/// Decides, for a route that needs a key, whether a request may run it:
/// the key and its scope (``APIKeyTable``), the key's rate limit
/// (``RateLimiter``), and that a body is declared `application/json`: an
/// HTML form always sends a Content-Type of its own, and a cross-site
/// script cannot send this one without a preflight the server never allows.
final class AccessGate: Sendable {
    let table: APIKeyTable
    private let limiter: Mutex<RateLimiter>
    private let clock: @Sendable () -> ContinuousClock.Instant

    init(table: APIKeyTable, limiter: RateLimiter, clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.table = table
        self.limiter = Mutex(limiter)
        self.clock = clock
    }

    /// Nil when the request may run the route, else the answer to give instead.
    func refusal(for request: HTTPRequest, access: RouteAccess) -> APIError? {
        guard case .key(let scope) = access else { return nil }
        let key: String?
        switch table.authorize(request.headerFields[.authorization], needs: scope, host: request.authority) {
        case .open: key = nil
        case .allowed(let name): key = name
        case .unauthorized(let message): return APIError(status: .unauthorized, code: "unauthorized", message: message)
        case .forbidden(let message): return APIError(status: .forbidden, code: "forbidden", message: message)
        }
        if let key {
            let now = clock()
            if case .refuse(let wait) = limiter.withLock({ $0.admit(key, at: now) }) {
                let seconds = RateLimiter.retryAfterSeconds(wait)
                return APIError(
                    status: .tooManyRequests, code: "rate-limited",
                    message: "the API key's rate limit is spent (http.rate_limit); retry after \(seconds)s", retryAfter: seconds)
            }
        }
        let contentType = request.headerFields[.contentType]
        if contentType.map({ !Self.isJSON($0) }) ?? Self.hasBody(request) {
            return APIError(
                status: .unsupportedMediaType, code: "unsupported-media-type",
                message: "a body sent to this route needs Content-Type: application/json; got \((contentType ?? "none").debugDescription)")
        }
        return nil
    }

    /// Whether the head announces a body (a length above 0, or chunks).
    static func hasBody(_ request: HTTPRequest) -> Bool {
        if request.headerFields[.transferEncoding] != nil { return true }
        guard let length = request.headerFields[.contentLength] else { return false }
        // Any other value, a malformed one included, announces a body.
        return length.trimmingCharacters(in: .whitespaces) != "0"
    }

    /// `application/json`, in any case, with or without parameters (`; charset=utf-8`).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let media = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        return media.lowercased() == "application/json"
    }
}
