import Foundation
import LiveDispatchCore
import OpenAPIRuntime

extension WorkerAPI {

    /// `GET /v1/dead-letters`: the newest dead letters, by activity and reason.
    func listDeadLetters(_ input: Operations.ListDeadLetters.Input) async throws -> Operations.ListDeadLetters.Output {
        let limit = input.query.limit ?? 50
        if let bad = Self.badLimit(limit, parameter: "limit") { return .badRequest(bad) }
        var query = DeadLetterQuery(activity: input.query.activity, reason: input.query.reason, limit: limit)
        switch await Self.reading({ try await readTopic(topics.deadLetters, .all) { query.consider(partition: $0.partition, offset: $0.offset, value: $0.value) } }) {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        let page = query.page
        return .ok(.init(body: .json(.init(deadLetters: Self.entries(page.matches), scanned: query.scanned, truncated: page.truncated))))
    }

    /// A query's newest matches as the API lists them.
    static func entries(_ matches: [DeadLetterQuery.Match]) -> [Components.Schemas.DeadLetterEntry] {
        matches.compactMap { match in
            container(match.json).map {
                Components.Schemas.DeadLetterEntry(
                    id: "\(match.partition)-\(match.offset)", partition: Int(match.partition), offset: Int(match.offset), deadLetter: $0)
            }
        }
    }

    /// `POST /v1/dead-letters/{id}/replay`: produces a dead letter's
    /// original record again, or re-registers the update token a push to
    /// which failed (``DeadLetterReplay``).
    func replayDeadLetter(_ input: Operations.ReplayDeadLetter.Input) async throws -> Operations.ReplayDeadLetter.Output {
        let id = input.path.id
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let partition = Int32(parts[0]), partition >= 0, let offset = Int64(parts[1]), offset >= 0 else {
            return .badRequest(.init(body: .json(APIError.invalid(
                "the request is not valid", problems: [.init(pointer: "#/parameters/id", message: "expected <partition>-<offset>, e.g. 3-17")]).body)))
        }
        var found: [UInt8]??
        switch await Self.reading({ try await readTopic(topics.deadLetters, .number(partition)) { if $0.offset == offset { found = .some($0.value) } } }) {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        guard let value = found else {
            return .notFound(.init(body: .json(.init(error: "not-found", message: "no dead letter \(id) in the dead-letters topic"))))
        }
        guard let value, let letter = try? DeadLetter(json: JSONValue.parse(value)) else {
            return Self.conflict(.init(code: "no-original", message: "dead letter \(id) keeps no original record to replay"))
        }
        let replay = DeadLetterReplay(
            id: id, tokensTopic: topics.tokens, replayableTopics: rules().topics.union([topics.commands, topics.tokens]), apps: apps)
        let record: DeadLetterReplay.Record
        switch replay.decide(letter) {
        case .refused(let refusal):
            return Self.conflict(refusal)
        case .produce(let original):
            record = original
        case .reregister(let activity, let token):
            var stored = StoredTokenQuery(activity: activity, token: token)
            switch await Self.reading({ try await readTopic(topics.tokenStore, .key(activity.rawValue)) { stored.consider(key: $0.key, value: $0.value) } }) {
            case .busy(let answer)?: return .tooManyRequests(answer)
            case .unavailable(let answer)?: return .serviceUnavailable(answer)
            case nil: break
            }
            switch replay.reregistration(of: letter, activity: activity, token: token, stored: stored.registration, now: UnixTime(seconds: Date().timeIntervalSince1970)) {
            case .success(let registration): record = registration
            case .failure(let refusal): return Self.conflict(refusal)
            }
        }
        do {
            try await produce(record.topic, Array(record.key.utf8), record.value)
        } catch {
            return .serviceUnavailable(.init(
                headers: .init(retryAfter: 1),
                body: .json(.init(error: "unavailable", message: "Kafka did not acknowledge the record (\(error)); nothing was replayed, retry later"))))
        }
        return .accepted(.init(body: .json(.init(id: id, topic: record.topic))))
    }

    /// The 409 for a dead letter that is not replayed.
    static func conflict(_ refusal: DeadLetterReplay.Refusal) -> Operations.ReplayDeadLetter.Output {
        .conflict(.init(body: .json(.init(error: refusal.code, message: refusal.message))))
    }

    /// Why reads of internal topics gave no answer.
    enum ReadFailure: Sendable {
        /// Another read is running (429).
        case busy(Components.Responses.TooManyRequests)
        /// Kafka could not be read (503).
        case unavailable(Components.Responses.Unavailable)
    }

    /// Runs reads of internal topics: nil when they all succeeded.
    static func reading(_ reads: () async throws -> Void) async -> ReadFailure? {
        do {
            try await reads()
            return nil
        } catch let busy as WorkerHTTPServer.ScanGate.Busy {
            return .busy(Self.busy(busy))
        } catch {
            return .unavailable(unreadable(error))
        }
    }

    /// The 400 for a `limit`-like parameter outside 1…500, or nil.
    static func badLimit(_ value: Int, parameter: String) -> Components.Responses.BadRequest? {
        guard !(1...500).contains(value) else { return nil }
        return .init(body: .json(APIError.invalid(
            "the request is not valid", problems: [.init(pointer: "#/parameters/\(parameter)", message: "expected 1 to 500")]).body))
    }

    /// Another read of the topic is running: the client retries shortly.
    static func busy(_ busy: WorkerHTTPServer.ScanGate.Busy) -> Components.Responses.TooManyRequests {
        .init(headers: .init(retryAfter: 1), body: .json(.init(error: "busy", message: "\(busy); retry after 1s")))
    }

    /// Kafka could not be read for a read route (any of them).
    static func unreadable(_ error: any Error) -> Components.Responses.Unavailable {
        .init(
            headers: .init(retryAfter: 1),
            body: .json(.init(error: "unavailable", message: "Kafka could not be read (\(error)); retry later")))
    }

    /// A JSON object as the generated code's free-form object.
    static func container(_ json: JSONValue) -> OpenAPIObjectContainer? {
        try? JSONDecoder().decode(OpenAPIObjectContainer.self, from: Data(json.serialized()))
    }
}
