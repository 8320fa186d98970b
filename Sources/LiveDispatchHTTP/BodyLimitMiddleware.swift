import HTTPTypes
import Hummingbird
import LiveDispatchCore

/// Bodies: none on GET, HEAD or DELETE; at most `maxBytes` elsewhere, read
/// whole before any handler sees the request (413 above the limit, without
/// reading it when `Content-Length` already says so). A body declared JSON
/// must be JSON by the rules of the parser that reads the Kafka topics
/// (``JSONValue/parse(_:limits:)``: no duplicate keys, bounded depth, valid
/// UTF-8), so a request and a record with the same bytes are read alike.
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
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: maxBytes)
            } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
                throw APIError.tooLarge(limit: maxBytes)
            }
            if body.readableBytes > 0, AccessGate.isJSON(request.headers[.contentType]) {
                do {
                    _ = try JSONValue.parse(Array(buffer: body))
                } catch {
                    throw APIError(status: .badRequest, code: "invalid-json", message: "the body is not valid JSON: \(error)")
                }
            }
            return try await next(request, context)
        }
    }
}
