import HTTPTypes
import Hummingbird
import LiveDispatchCore

/// Bodies: none on GET, HEAD or DELETE; at most `maxBytes` elsewhere, read
/// whole before any handler sees the request (413 above the limit, without
/// reading it when `Content-Length` already says so). A body declared JSON
/// must be JSON by the rules of the parser that reads the Kafka topics
/// (``JSONValue/parse(_:limits:)``: no duplicate keys, bounded depth, valid
/// UTF-8), so a request and a record with the same bytes are read alike. A
/// number it cannot carry exactly is refused 400 `invalid-request` with the
/// pointer of its field, before anything decodes it into a double.
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
                } catch where error.isInexactNumber {
                    let pointer = JSONPointer.make(error.path.map { component in
                        switch component {
                        case .member(let key): key
                        case .element(let index): String(index)
                        }
                    })
                    throw APIError.invalid(
                        "the request is not valid: \(pointer.isEmpty ? "the body" : pointer): \(error.message)",
                        problems: [.init(pointer: pointer, message: error.message)])
                } catch {
                    throw APIError(status: .badRequest, code: "invalid-json", message: "the body is not valid JSON: \(error)")
                }
            }
            return try await next(request, context)
        }
    }
}
