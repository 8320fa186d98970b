import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OpenAPIRuntime

/// An answer other than success, raised anywhere in the request's path and
/// turned into a JSON body of the `Error` schema of `openapi.yaml` by
/// ``ErrorResponseMiddleware``.
struct APIError: Error, Sendable {
    var status: HTTPResponse.Status
    /// Stable code: 400 `invalid-request`, `invalid-path`, `invalid-json`; 401 `unauthorized`; 403 `forbidden`;
    /// 404 `not-found`, `no-activity`; 405 `method-not-allowed`; 413 `too-large`, `payload-too-large`;
    /// 415 `unsupported-media-type`; 422 `content-state-mismatch`, `attributes-mismatch`, `app-mismatch`,
    /// `undeclared-type`; 429 `rate-limited`; 500 `internal`; 501 `not-implemented`; 503 `unavailable`.
    var code: String
    var message: String
    var problems: [Components.Schemas.Problem] = []
    /// Seconds for `Retry-After`, on 429 and 503.
    var retryAfter: Int?

    static func invalid(_ message: String, problems: [Components.Schemas.Problem] = []) -> APIError {
        APIError(status: .badRequest, code: "invalid-request", message: message, problems: problems)
    }

    static func tooLarge(limit: Int) -> APIError {
        APIError(status: .contentTooLarge, code: "too-large", message: "the body is larger than the limit of \(limit) bytes (http.max_body_bytes)")
    }

    var body: Components.Schemas._Error {
        .init(error: code, message: message, problems: problems.isEmpty ? nil : problems)
    }

    func response() -> Response {
        Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The answer as the generated server's handlers give it.
    func openAPIResponse() -> (HTTPResponse, HTTPBody?) {
        (HTTPResponse(status: status, headerFields: headers), HTTPBody(bytes))
    }

    private var headers: HTTPFields {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return headers
    }

    private var bytes: [UInt8] {
        Array((try? JSONEncoder().encode(body)) ?? Data(#"{"error":"internal","message":"the error could not be encoded"}"#.utf8))
    }
}

/// RFC 6901 JSON pointers for the problems of a request.
enum JSONPointer {
    /// `/a/b` from path components, escaping `~` and `/`.
    static func make(_ components: [String]) -> String {
        components.map { "/" + $0.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1") }.joined()
    }

    /// The pointer of a decoding error's coding path.
    static func make(_ codingPath: [any CodingKey]) -> String {
        make(codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue })
    }
}
