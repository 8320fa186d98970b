import HTTPTypes
import Hummingbird
import OpenAPIRuntime
import Synchronization

/// The methods each registered path template answers and what each route
/// needs (``RouteAccess``), filled as routes are registered
/// (``GuardedRouter``) and read by ``MethodMiddleware`` and
/// ``AccessBeforeBodyMiddleware``.
final class RouteMethods: Sendable {
    private let templates = Mutex<[(segments: [Substring], method: HTTPRequest.Method, access: RouteAccess)]>([])

    func add(_ method: HTTPRequest.Method, _ path: String, access: RouteAccess = .open) {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        templates.withLock { $0.append((segments, method, access)) }
    }

    /// The methods of the templates `path` matches (a `{name}` or `:name`
    /// segment matches any one segment).
    func allowed(_ path: String) -> Set<HTTPRequest.Method> {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return templates.withLock { templates in
            Set(templates.filter { Self.matches($0.segments, segments) }.map(\.method))
        }
    }

    /// What the route `method path` resolves to needs: of the templates it
    /// matches, the one with the most literal segments, as the router
    /// prefers a constant segment to a parameter. Nil when no template
    /// matches, or when two equally literal ones disagree (the handler's own
    /// check then decides).
    func access(_ method: HTTPRequest.Method, _ path: String) -> RouteAccess? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let matched = templates.withLock { templates in
            templates.filter { $0.method == method && Self.matches($0.segments, segments) }
        }
        func literals(_ template: [Substring]) -> Int { template.filter { !Self.isParameter($0) }.count }
        guard let most = matched.map({ literals($0.segments) }).max() else { return nil }
        let accesses = Set(matched.filter { literals($0.segments) == most }.map(\.access))
        return accesses.count == 1 ? accesses.first : nil
    }

    static func isParameter(_ segment: Substring) -> Bool {
        segment.hasPrefix("{") && segment.hasSuffix("}") || segment.hasPrefix(":")
    }

    static func matches(_ template: [Substring], _ segments: [Substring]) -> Bool {
        guard template.count == segments.count else { return false }
        return zip(template, segments).allSatisfy { pattern, segment in
            isParameter(pattern) || pattern == segment
        }
    }
}

/// A path the server routes, asked with a method it does not answer, is
/// `405` with the methods it does answer in `Allow`; a path no route
/// matches falls through to the router's 404. (The router resolves a route
/// by path and method before its middleware runs, so this runs only where
/// no route matched.)
struct MethodMiddleware<Context: RequestContext>: RouterMiddleware {
    let methods: RouteMethods

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let allowed = methods.allowed(request.uri.path)
        if allowed.isEmpty || allowed.contains(request.method) { return try await next(request, context) }
        let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
        var response = APIError(
            status: .methodNotAllowed, code: "method-not-allowed",
            message: "\(request.uri.path.debugDescription) answers \(allow), not \(request.method.rawValue)"
        ).response()
        response.headers[.allow] = allow
        return response
    }
}

/// `HEAD` of a `GET` route (RFC 9110 §9.3.2): the `GET`'s answer with its
/// `Content-Length` and without its body.
enum HeadAnswer {
    static func strip(_ response: Response) -> Response {
        var response = response
        let length = response.body.contentLength
        response.body = ResponseBody(contentLength: length) { writer in try await writer.finish(nil) }
        return response
    }

    static func strip(_ answer: (HTTPResponse, HTTPBody?)) -> (HTTPResponse, HTTPBody?) {
        guard let body = answer.1 else { return answer }
        return (answer.0, HTTPBody(AsyncStream<HTTPBody.ByteChunk> { $0.finish() }, length: body.length))
    }
}
