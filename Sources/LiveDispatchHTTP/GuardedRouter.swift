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

    /// The methods each path answers, for ``MethodMiddleware``.
    let methods: RouteMethods

    init(router: Hummingbird.Router<BasicRequestContext>, gate: AccessGate, methods: RouteMethods = RouteMethods(), document: String = OpenAPIDocument.json) throws {
        self.router = router
        self.gate = gate
        self.methods = methods
        declared = try Self.declaredScopes(document)
    }

    /// A route anyone may call.
    func open(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping @Sendable (Request, BasicRequestContext) async throws -> Response) {
        routes.append(.init(method: method, path: path, access: .open))
        methods.add(method, path)
        router.on(RouterPath(path), method: method, use: handler)
        if method == .get {
            methods.add(.head, path)
            router.on(RouterPath(path), method: .head) { request, context in HeadAnswer.strip(try await handler(request, context)) }
        }
    }

    /// A route of the generated server: called by `registerHandlers(on:)`.
    func register(
        _ handler: @escaping @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        guard let scope = declared[Self.routeKey(method, path)] else { throw UndeclaredRouteAccess(method: method.rawValue, path: path) }
        let access = RouteAccess.key(scope)
        routes.append(.init(method: method, path: path, access: access))
        methods.add(method, path, access: access)
        let gate = gate
        let guarded: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?) = { request, body, metadata in
            switch gate.admit(request, access: access) {
            case .failure(let refusal): return refusal.openAPIResponse()
            case .success(let caller): return try await RequestCaller.$current.withValue(caller) { try await handler(request, body, metadata) }
            }
        }
        router.register(guarded, method: method, path: path)
        if method == .get {
            methods.add(.head, path, access: access)
            router.register({ HeadAnswer.strip(try await guarded($0, $1, $2)) }, method: .head, path: path)
        }
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

/// Who calls a route behind a key: the key's name (``AccessGate/keylessReads``
/// for a keyless loopback read) and its scopes, for the handler's task.
struct RequestCaller: Sendable, Hashable {
    var name: String
    var scopes: Set<WorkerConfiguration.APIScope>

    @TaskLocal static var current: RequestCaller?
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
        if case .failure(let refusal) = admit(request, access: access) { return refusal }
        return nil
    }

    /// The answer to give before the request's body is read, when its head
    /// alone already refuses it: no valid key (401), a key without the
    /// route's scope or a cross-site keyless read (403), a body that is not
    /// JSON (415). It spends nothing of the rate limit, which the handler's
    /// own check (``admit(_:access:)``) still applies.
    func refusalBeforeBody(_ request: HTTPRequest, access: RouteAccess) -> APIError? {
        guard case .key(let scope) = access else { return nil }
        switch table.authorize(request.headerFields[.authorization], needs: scope, host: request.authority) {
        case .open:
            if let site = Self.crossSite(request) {
                return APIError(
                    status: .forbidden, code: "forbidden",
                    message: "a read without a key is answered only to this machine's own pages and tools; this request came from \(site)")
            }
        case .allowed: break
        case .unauthorized(let message): return APIError(status: .unauthorized, code: "unauthorized", message: message)
        case .forbidden(let message): return APIError(status: .forbidden, code: "forbidden", message: message)
        }
        return Self.mediaRefusal(request)
    }

    /// Who calls the route (nil for an open one), or the answer to give instead.
    func admit(_ request: HTTPRequest, access: RouteAccess) -> Result<RequestCaller?, APIError> {
        guard case .key(let scope) = access else { return .success(nil) }
        let caller: RequestCaller
        switch table.authorize(request.headerFields[.authorization], needs: scope, host: request.authority) {
        case .open:
            if let site = Self.crossSite(request) {
                return .failure(APIError(
                    status: .forbidden, code: "forbidden",
                    message: "a read without a key is answered only to this machine's own pages and tools; this request came from \(site)"))
            }
            caller = RequestCaller(name: Self.keylessReads, scopes: [.read])
        case .allowed(let name): caller = RequestCaller(name: name, scopes: table.scopes(ofKey: name))
        case .unauthorized(let message): return .failure(APIError(status: .unauthorized, code: "unauthorized", message: message))
        case .forbidden(let message): return .failure(APIError(status: .forbidden, code: "forbidden", message: message))
        }
        let now = clock()
        if case .refuse(let wait) = limiter.withLock({ $0.admit(caller.name, at: now) }) {
            let seconds = RateLimiter.retryAfterSeconds(wait)
            let whose = caller.name == Self.keylessReads ? "keyless loopback reads share one rate limit" : "the API key's rate limit"
            return .failure(APIError(
                status: .tooManyRequests, code: "rate-limited",
                message: "\(whose) is spent (http.rate_limit); retry after \(seconds)s", retryAfter: seconds))
        }
        if let refusal = Self.mediaRefusal(request) { return .failure(refusal) }
        return .success(caller)
    }

    /// 415 unless a body sent is declared `application/json`.
    static func mediaRefusal(_ request: HTTPRequest) -> APIError? {
        let contentType = request.headerFields[.contentType]
        guard contentType.map({ !isJSON($0) }) ?? hasBody(request) else { return nil }
        return APIError(
            status: .unsupportedMediaType, code: "unsupported-media-type",
            message: "a body sent to this route needs Content-Type: application/json; got \((contentType ?? "none").debugDescription)")
    }

    /// The rate limiter's name for every read without a key: they share one
    /// limit, as one key would. (No configured key can have this name: it
    /// holds a space.)
    static let keylessReads = "keyless reads"

    /// Where a request came from when a browser says it came from another
    /// site: `Sec-Fetch-Site: cross-site`, or an `Origin` whose host is not
    /// loopback (`null` included). Nil for tools (no such header) and for
    /// the console's own pages.
    static func crossSite(_ request: HTTPRequest) -> String? {
        let site = request.headerFields.first { $0.name.canonicalName == "sec-fetch-site" }?.value
        if let site, site.trimmingCharacters(in: .whitespaces).lowercased() == "cross-site" {
            return "another site (Sec-Fetch-Site: cross-site)"
        }
        guard let origin = request.headerFields[.origin] else { return nil }
        let authority = origin.split(separator: "://", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        if let host = APIKeyTable.hostName(ofHeader: authority), APIKeyTable.isLoopback(host: host) { return nil }
        return "the page of origin \(origin.debugDescription)"
    }

    /// Whether the head announces a body (a length above 0, or chunks).
    static func hasBody(_ request: HTTPRequest) -> Bool {
        if request.headerFields[.transferEncoding] != nil { return true }
        guard let length = request.headerFields[.contentLength] else { return false }
        // A length is a number (`0` and `00` alike); a malformed one announces a body.
        return Int(length.trimmingCharacters(in: .whitespaces)).map { $0 != 0 } ?? true
    }

    /// `application/json`, in any case, with or without parameters (`; charset=utf-8`).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let media = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        return media.lowercased() == "application/json"
    }
}
