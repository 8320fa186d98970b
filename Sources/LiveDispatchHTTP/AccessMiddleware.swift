import Hummingbird
import Synchronization

/// Authenticates API keys and applies each key's rate limit before anything
/// of the request's body is read.
struct AccessMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The limiter's one lock, shared by every copy of the middleware.
    final class SharedLimiter: Sendable {
        let state: Mutex<RateLimiter>
        init(_ limiter: RateLimiter) { state = Mutex(limiter) }
    }

    let table: APIKeyTable
    let limiter: SharedLimiter
    let clock: @Sendable () -> ContinuousClock.Instant

    init(table: APIKeyTable, limiter: RateLimiter, clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.table = table
        self.limiter = SharedLimiter(limiter)
        self.clock = clock
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let scope = APIKeyTable.requiredScope(method: request.method, path: request.uri.path)
        switch table.authorize(request.headers[.authorization], needs: scope) {
        case .open:
            return try await next(request, context)
        case .unauthorized(let message):
            return APIError(status: .unauthorized, code: "unauthorized", message: message).response()
        case .forbidden(let message):
            return APIError(status: .forbidden, code: "forbidden", message: message).response()
        case .allowed(let key):
            let now = clock()
            switch limiter.state.withLock({ $0.admit(key, at: now) }) {
            case .allow:
                return try await next(request, context)
            case .refuse(let wait):
                let seconds = RateLimiter.retryAfterSeconds(wait)
                return APIError(
                    status: .tooManyRequests, code: "rate-limited",
                    message: "the API key's rate limit is spent (http.rate_limit); retry after \(seconds)s", retryAfter: seconds
                ).response()
            }
        }
    }
}
