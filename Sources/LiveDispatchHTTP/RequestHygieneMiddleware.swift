import Foundation
import HTTPTypes
import Hummingbird

/// The outermost middleware. A request whose path is not in its one
/// canonical spelling (``RequestPath/problem(_:)``) is refused before any
/// handler runs, and every answer says it is not to be sniffed or cached:
/// `X-Content-Type-Options: nosniff`, and `Cache-Control: no-store` unless
/// the route chose its own (the console's files are revalidated, `no-cache`).
struct RequestHygieneMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        if let problem = RequestPath.problem(request.uri.path) {
            response = APIError(status: .badRequest, code: "invalid-path", message: "the path \(request.uri.path.debugDescription) \(problem)").response()
        } else if let refusal = RequestFraming.refusal(request.headers) {
            response = refusal.response()
        } else {
            response = try await next(request, context)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }
}

/// What the head says of the request's framing, refused where RFC 9112
/// refuses it: a second `Host` (400; the first became the authority), a
/// `Transfer-Encoding` other than plain `chunked` (501: no coding is
/// decoded, so `gzip, chunked` would be read as its compressed bytes), and
/// a `Content-Length` that is not one number (400). Pure.
enum RequestFraming {
    static func refusal(_ headers: HTTPFields) -> APIError? {
        if headers.contains(where: { $0.name.canonicalName == "host" }) {
            return APIError(status: .badRequest, code: "invalid-request", message: "the request has more than one Host header")
        }
        let encodings = headers[values: .transferEncoding]
        if !encodings.isEmpty {
            let codings = encodings.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if codings != ["chunked"] {
                return APIError(
                    status: .notImplemented, code: "not-implemented",
                    message: "Transfer-Encoding \(encodings.joined(separator: ", ").debugDescription) is not supported; send the body plain or as chunked only")
            }
        }
        let lengths = Set(headers[values: .contentLength].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) })
        if !lengths.isEmpty {
            let numbers = Set(lengths.map { length in length.allSatisfy(\.isASCIIDigit) ? Int(length) : nil })
            if numbers.count != 1 || numbers.contains(nil) {
                return APIError(status: .badRequest, code: "invalid-request", message: "Content-Length \(lengths.sorted().joined(separator: ", ").debugDescription) is not one length")
            }
        }
        return nil
    }
}

/// The one spelling of a request path the server routes: no empty segment
/// (`//`, a trailing `/`), no `.` or `..` segment, plainly or
/// percent-encoded, no encoded `/`, `\` or control character, no malformed
/// `%` escape, no byte outside printable ASCII. Pure.
enum RequestPath {
    /// Nil for a canonical path, else what is wrong with it.
    static func problem(_ path: String) -> String? {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return "does not start with /" }
        guard !bytes.contains(where: { $0 < 0x21 || $0 > 0x7E || $0 == UInt8(ascii: "\\") }) else {
            return "holds a byte outside printable ASCII or a backslash"
        }
        if bytes.count == 1 { return nil }
        for segment in bytes.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if segment.isEmpty { return "has an empty segment (// or a trailing /)" }
            guard let decoded = percentDecoded(Array(segment)) else { return "has a malformed %-escape" }
            if decoded == [UInt8(ascii: ".")] || decoded == [UInt8(ascii: "."), UInt8(ascii: ".")] { return "has a . or .. segment" }
            if decoded.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }) {
                return "encodes a /, a \\ or a control character"
            }
        }
        return nil
    }

    /// The bytes with each `%XX` decoded, or nil when an escape is malformed.
    static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) else { return nil }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Character {
    /// `0` to `9`, and nothing else that Unicode calls a digit.
    var isASCIIDigit: Bool { isASCII && isNumber }
}
