import HTTPTypes
import Hummingbird

/// Bodies: none on GET, HEAD or DELETE; at most `maxBytes` elsewhere, read
/// whole before any handler sees the request (413 above the limit, without
/// reading it when `Content-Length` already says so).
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    let maxBytes: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        let declared = request.headers[.contentLength].map { Int($0) }
        let chunked = request.headers[.transferEncoding] != nil
        let hasBody = chunked || (declared.flatMap { $0 } ?? 0) > 0
        switch request.method {
        case .get, .head, .delete:
            if hasBody { throw APIError.invalid("a \(request.method.rawValue) request has no body") }
            return try await next(request, context)
        default:
            if let declared, (declared ?? Int.max) > maxBytes { throw APIError.tooLarge(limit: maxBytes) }
            do {
                _ = try await request.collectBody(upTo: maxBytes)
            } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
                throw APIError.tooLarge(limit: maxBytes)
            }
            return try await next(request, context)
        }
    }
}
