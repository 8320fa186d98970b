import Foundation
import Hummingbird
import Logging
import NIOHTTP1
import OpenAPIRuntime

/// The outermost middleware: every error on the way becomes a JSON answer of
/// the `Error` schema, a request the generated code could not decode a 400
/// that points at the bad field, and nothing a client sends becomes a 500.
struct ErrorResponseMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return Self.answer(for: error, path: request.uri.path, logger: logger).response()
        }
    }

    static func answer(for error: any Error, path: String, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as ServerError:
            // The generated server wraps what it could not decode.
            return answer(forServerError: error, path: path, logger: logger)
        case let error as HTTPParserError:
            // A body whose framing the client broke (a malformed chunk size, say) is the client's to fix.
            return APIError(status: .badRequest, code: "invalid-request", message: "the request's framing is malformed: \(error)")
        case let error as any HTTPResponseError where error.status == .contentTooLarge:
            return APIError(status: .contentTooLarge, code: "too-large", message: "the body is too large")
        case let error as any HTTPResponseError where error.status == .notFound:
            return APIError(status: .notFound, code: "not-found", message: "no route \(path.debugDescription); try /healthz, /readyz, /metrics, /status or /v1/openapi.json")
        case let error as any HTTPResponseError where error.status.code < 500:
            return APIError(status: error.status, code: "invalid-request", message: error.status.reasonPhrase)
        default:
            logger.error("HTTP request failed", metadata: ["http.path": "\(path)", "error": "\(error)"])
            return APIError(status: .internalServerError, code: "internal", message: "the request failed inside the worker; see its log")
        }
    }

    static func answer(forServerError error: ServerError, path: String, logger: Logger) -> APIError {
        // A handler's own refusal, with its own status.
        if let refusal = error.underlyingError as? APIError { return refusal }
        if let decoding = error.underlyingError as? DecodingError {
            let (path, message): ([any CodingKey], String) =
                switch decoding {
                case .typeMismatch(let type, let context): (context.codingPath, "expected \(type): \(context.debugDescription)")
                case .valueNotFound(let type, let context): (context.codingPath, "expected \(type), found null or nothing")
                case .keyNotFound(let key, let context): (context.codingPath + [key], "is required")
                case .dataCorrupted(let context): (context.codingPath, context.debugDescription)
                @unknown default: ([], "\(decoding)")
                }
            return .invalid("the body does not match the schema", problems: [.init(pointer: JSONPointer.make(path), message: message)])
        }
        guard error.httpStatus.code < 500 else {
            logger.error("HTTP handler failed", metadata: ["http.path": "\(path)", "error": "\(error.underlyingError)"])
            return APIError(status: .internalServerError, code: "internal", message: "the request failed inside the worker; see its log")
        }
        // Missing parameters, a wrong Content-Type or Accept: the client's to fix.
        return .invalid("the request is not valid: \(error.causeDescription)")
    }
}
