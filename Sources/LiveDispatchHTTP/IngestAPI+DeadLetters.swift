import Foundation
import LiveDispatchCore
import OpenAPIRuntime

extension IngestAPI {
    /// Scans the `dead-letters` topic with a query and returns it filled.
    typealias ScanDeadLetters = @Sendable (DeadLetterQuery) async throws -> DeadLetterQuery

    /// `GET /v1/dead-letters`: the newest dead letters, by activity and reason.
    func listDeadLetters(_ input: Operations.ListDeadLetters.Input) async throws -> Operations.ListDeadLetters.Output {
        let limit = input.query.limit ?? 50
        guard (1...500).contains(limit) else {
            return .badRequest(.init(body: .json(APIError.invalid(
                "the request is not valid", problems: [.init(pointer: "#/parameters/limit", message: "expected 1 to 500")]).body)))
        }
        let query: DeadLetterQuery
        do {
            query = try await scanDeadLetters(DeadLetterQuery(activity: input.query.activity, reason: input.query.reason, limit: limit))
        } catch {
            return .serviceUnavailable(.init(
                headers: .init(retryAfter: 1),
                body: .json(.init(error: "unavailable", message: "the dead-letters topic could not be read (\(error)); retry later"))))
        }
        let entries = query.newest.compactMap { match in
            Self.container(match.json).map { Components.Schemas.DeadLetterEntry(partition: Int(match.partition), offset: Int(match.offset), deadLetter: $0) }
        }
        return .ok(.init(body: .json(.init(deadLetters: entries, scanned: query.scanned))))
    }

    /// A JSON object as the generated code's free-form object.
    static func container(_ json: JSONValue) -> OpenAPIObjectContainer? {
        try? JSONDecoder().decode(OpenAPIObjectContainer.self, from: Data(json.serialized()))
    }
}
