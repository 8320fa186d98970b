import Foundation
import HTTPTypes
import LiveDispatchCore
import OpenAPIRuntime

/// Braze's Live Activity routes, `POST /messages/live_activity/update` and
/// `/start`, with Braze's bodies and answers: a backend moving from Braze
/// changes its base URL and API key only. Each body is read by
/// ``BrazeRequest`` into an `ActivityCommand`, which goes through
/// ``submit(_:)`` like every other command; answers are Braze's
/// `{"message": "success"}` (201) and `{"message", "errors"}`.
extension WorkerAPI {
    func brazeUpdateLiveActivity(_ input: Operations.BrazeUpdateLiveActivity.Input) async throws -> Operations.BrazeUpdateLiveActivity.Output {
        let body = switch input.body { case .json(let body): body }
        let outcome = await submitBraze(.update, body: body, idempotencyKey: input.headers.idempotencyKey)
        return try Self.brazeAnswer(
            outcome, created: { .created(.init(body: .json($0))) }, badRequest: { .badRequest(.init(body: .json($0))) },
            tooLarge: { .contentTooLarge(.init(body: .json($0))) }, unprocessable: { .unprocessableContent(.init(body: .json($0))) },
            unavailable: { .serviceUnavailable(.init(headers: .init(retryAfter: $0), body: .json($1))) },
            undocumented: { .undocumented(statusCode: $0, $1) })
    }

    func brazeStartLiveActivity(_ input: Operations.BrazeStartLiveActivity.Input) async throws -> Operations.BrazeStartLiveActivity.Output {
        let body = switch input.body { case .json(let body): body }
        let outcome = await submitBraze(.start, body: body, idempotencyKey: input.headers.idempotencyKey)
        return try Self.brazeAnswer(
            outcome, created: { .created(.init(body: .json($0))) }, badRequest: { .badRequest(.init(body: .json($0))) },
            tooLarge: { .contentTooLarge(.init(body: .json($0))) }, unprocessable: { .unprocessableContent(.init(body: .json($0))) },
            unavailable: { .serviceUnavailable(.init(headers: .init(retryAfter: $0), body: .json($1))) },
            undocumented: { .undocumented(statusCode: $0, $1) })
    }

    /// Reads a Braze body into a command and submits it.
    func submitBraze(
        _ kind: BrazeRequest.Kind, body: some Encodable & Sendable, idempotencyKey: String?
    ) async -> Outcome<Components.Schemas.CommandAccepted> {
        if let idempotencyKey, !Self.isValidIdempotencyKey(idempotencyKey) {
            return .invalid(.invalid("the request is not valid", problems: [.init(
                pointer: "#/parameters/Idempotency-Key", message: "expected 1 to 200 printable ASCII characters")]))
        }
        let request = BrazeRequest(kind: kind, body: Self.encoded(body))
        switch request.command(idempotencyKey: idempotencyKey, makeID: makeID, apps: brazeApps, directory: apps) {
        case .success(let command):
            let outcome = await submit(command)
            // A refusal names the command's fields; the answer names Braze's (`app` is `app_id`).
            guard case .refused(var error) = outcome else { return outcome }
            error.problems = error.problems.map { .init(pointer: BrazeRequest.pointer(ofCommandPointer: $0.pointer), message: $0.message) }
            return .refused(error)
        case .failure(let refusal):
            let fields = refusal.problems.map { $0.pointer.isEmpty ? "the body" : $0.pointer }.joined(separator: ", ")
            return .invalid(.invalid(
                "the \(kind.route) request is not valid: \(fields)",
                problems: refusal.problems.map { .init(pointer: $0.pointer, message: $0.message) }))
        }
    }

    /// An outcome as one Braze operation's `Output`: 201 `{"message":
    /// "success"}`; a refusal as Braze's `{"message", "errors"}` with its
    /// own status (400, 413, 422); another status (404) thrown, in the
    /// `Error` shape; 503 with `Retry-After`.
    static func brazeAnswer<Output>(
        _ outcome: Outcome<Components.Schemas.CommandAccepted>,
        created: (Components.Schemas.BrazeAnswer) -> Output,
        badRequest: (Components.Schemas.BrazeAnswer) -> Output,
        tooLarge: (Components.Schemas.BrazeAnswer) -> Output,
        unprocessable: (Components.Schemas.BrazeAnswer) -> Output,
        unavailable: (Int, Components.Schemas.BrazeAnswer) -> Output,
        undocumented: (Int, UndocumentedPayload) -> Output
    ) throws(APIError) -> Output {
        switch outcome {
        case .accepted: return created(.init(message: "success"))
        case .invalid(let error): return badRequest(brazeBody(error))
        case .unavailable(let error): return unavailable(error.retryAfter ?? 1, brazeBody(error))
        case .refused(let error):
            switch error.status {
            case .badRequest: return badRequest(brazeBody(error))
            case .contentTooLarge: return tooLarge(brazeBody(error))
            case .unprocessableContent: return unprocessable(brazeBody(error))
            default:
                // The generated server drops an undocumented answer's body:
                // thrown, the refusal keeps it (`message` as Braze's, its fields under `problems`).
                throw error
            }
        }
    }

    /// Braze's error shape: what went wrong, and each field refused.
    static func brazeBody(_ error: APIError) -> Components.Schemas.BrazeAnswer {
        .init(message: error.message, errors: error.problems.isEmpty ? nil : error.problems)
    }
}
