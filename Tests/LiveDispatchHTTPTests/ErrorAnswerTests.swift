import Hummingbird
@testable import LiveDispatchHTTP
import Logging
import Testing

@Suite("Error answers")
struct ErrorAnswerTests {
    typealias Middleware = ErrorResponseMiddleware<BasicRequestContext>
    let logger = Logger(label: "test")

    @Test("Hummingbird's errors become the API's JSON errors with their status")
    func hummingbirdErrors() {
        let tooLarge = Middleware.answer(for: HTTPError(.contentTooLarge), path: "/v1/tokens", logger: logger)
        #expect(tooLarge.status == .contentTooLarge && tooLarge.code == "too-large")
        let missing = Middleware.answer(for: HTTPError(.notFound), path: "/nowhere", logger: logger)
        #expect(missing.status == .notFound && missing.code == "not-found")
        let method = Middleware.answer(for: HTTPError(.methodNotAllowed), path: "/healthz", logger: logger)
        #expect(method.status == .methodNotAllowed && method.code == "invalid-request")
    }

    @Test("an API error passes as it is; anything else is a 500 that names no detail")
    func others() {
        struct Surprise: Error {}
        let limited = APIError(status: .tooManyRequests, code: "rate-limited", message: "m", retryAfter: 3)
        let passed = Middleware.answer(for: limited, path: "/v1/tokens", logger: logger)
        #expect(passed.code == "rate-limited" && passed.retryAfter == 3)
        let failure = Middleware.answer(for: Surprise(), path: "/v1/tokens", logger: logger)
        #expect(failure.status == .internalServerError && failure.code == "internal")
        #expect(failure.response().headers[.contentType] == "application/json")
        #expect(passed.response().headers[.retryAfter] == "3")
    }
}
