import HTTPTypes
import Hummingbird

/// Refuses a request whose head alone decides it (no valid key, a key
/// without the matched route's scope, a cross-site keyless read, a body not
/// declared JSON) before ``BodyLimitMiddleware`` reads a byte of its body:
/// bodies of unauthenticated requests are never buffered. An
/// `Expect: 100-continue` so refused gets its 401 or 403 at once, with no
/// `100 Continue`. A refused request that announced a body is answered with
/// `Connection: close`, and the connection closes after the answer
/// (``RequestDeadlineHandler``) instead of draining the body.
///
/// The route is found from the registered path templates
/// (``RouteMethods/access(_:_:)``); the handler's own check
/// (``AccessGate/admit(_:access:)``) still runs for every request let through.
struct AccessBeforeBodyMiddleware<Context: RequestContext>: RouterMiddleware {
    let methods: RouteMethods
    let gate: AccessGate

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let access = methods.access(request.method, request.uri.path),
            let refusal = gate.refusalBeforeBody(request.head, access: access)
        else { return try await next(request, context) }
        var response = refusal.response()
        if AccessGate.hasBody(request.head) { response.headers[.connection] = "close" }
        return response
    }
}
