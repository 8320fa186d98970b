import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker
import Synchronization

/// The routes of `openapi.yaml`. Ingest: each request becomes the same
/// `ActivityCommand` or `TokenRegistration` a backend would write to Kafka,
/// read by the same decoders as the `commands` and `tokens` topics, and is
/// produced there (key: the activity id) before the answer. Read: an
/// explanation of what the worker's rules make of an event, activities and
/// dead letters read from Kafka; replays.
struct WorkerAPI: APIProtocol {
    /// Produces one record and returns once Kafka acknowledged it.
    typealias Produce = @Sendable (_ topic: String, _ key: [UInt8], _ value: [UInt8]) async throws -> Void

    /// The worker's internal topics, by their full names.
    struct Topics: Sendable {
        var commands: String
        var tokens: String
        var state: String
        var tokenStore: String
        var deadLetters: String
        var channels: String
    }

    /// Which partitions of a topic to read: all, one, or the one a key goes to.
    enum Partitions: Sendable {
        case all
        case number(Int32)
        case key(String)
    }

    /// Reads a topic's chosen partitions to their end (a partition the topic
    /// does not have reads nothing), handing each record to `body`.
    typealias ReadTopic = @Sendable (_ topic: String, _ partitions: Partitions, _ body: (KafkaRecord) -> Void) async throws -> Void

    let topics: Topics
    let produce: Produce
    /// A fresh command id, for requests without `Idempotency-Key`.
    let makeID: @Sendable () -> String
    /// The rules the worker runs now.
    let rules: @Sendable () -> RuleSet
    /// Reads the internal topics for the read routes and replays.
    let readTopic: ReadTopic
    /// The deployment's apps: a request naming another `app` is refused as
    /// the dispatcher would dead-letter it.
    var apps: AppDirectory = .unchecked
    /// The `app_id` values the Braze-compatible routes accept.
    var brazeApps = BrazeApps()
    /// The activity's state when this worker owns its partition: a command's
    /// payload size is checked merged into it.
    var currentState: @Sendable (ActivityID) -> ActivityState? = { _ in nil }
    /// Whether this worker can tell the activity has no state (it owns the
    /// activity's partition and has read it to its end): an end for it is
    /// answered 404 instead of a dead letter.
    var hasNoState: @Sendable (ActivityID) async -> Bool = { _ in false }
    /// The commands accepted here and not yet seen applied, which the next
    /// command of their activity is judged with.
    var accepted = AcceptedCommandsBox()
    /// The reads this worker answers from memory as a partition's owner;
    /// without it every read is answered from Kafka.
    var owner: OwnerReads?
    /// What `POST /v1/rules/diff` reads; without it the route answers 503.
    var rulesDiff: RulesDiffSource?

    /// The rules directory and the domain topics by time, for
    /// `POST /v1/rules/diff`.
    struct RulesDiffSource: Sendable {
        var rulesDirectory: String
        var maxEventBytes: Int
        /// Reads every partition of `topics` from its first record at
        /// `since` (milliseconds since the epoch) or later to the end, at
        /// most `limit` records spread over the partitions (each its share,
        /// its most recent), a batch at a time; an error `body` throws stops it.
        var read: @Sendable (_ topics: [String], _ since: Int64, _ limit: Int, _ body: ([KafkaRecord]) throws -> Void) async throws -> Void
        /// What one diff may cost a caller with the `read` scope only, and one with `admin`.
        var readBudget = WorkerConfiguration().http.rulesDiffRead
        var adminBudget = WorkerConfiguration().http.rulesDiffAdmin
        /// The callers whose diff is running: one at a time per key.
        var running = RulesDiffRuns()
        var clock: @Sendable () -> ContinuousClock.Instant = { .now }
    }

    /// What became of one request.
    enum Outcome<Accepted: Sendable>: Sendable {
        case accepted(Accepted)
        case invalid(APIError)
        case unavailable(APIError)
        /// Refused with the error's own status (413 for a payload over APNs' limit).
        case refused(APIError)
    }

    // MARK: Activities

    func startActivity(_ input: Operations.StartActivity.Input) async throws -> Operations.StartActivity.Output {
        let body = switch input.body { case .json(let body): body }
        let outcome = await submit(.start, activity: input.path.activityId, idempotencyKey: input.headers.idempotencyKey, body: body)
        return try Self.answer(outcome, accepted: { .accepted(.init(body: .json($0))) }, badRequest: { .badRequest($0) }, unavailable: { .serviceUnavailable($0) })
    }

    func updateActivity(_ input: Operations.UpdateActivity.Input) async throws -> Operations.UpdateActivity.Output {
        let body = switch input.body { case .json(let body): body }
        let outcome = await submit(.update, activity: input.path.activityId, idempotencyKey: input.headers.idempotencyKey, body: body)
        return try Self.answer(outcome, accepted: { .accepted(.init(body: .json($0))) }, badRequest: { .badRequest($0) }, unavailable: { .serviceUnavailable($0) })
    }

    func endActivity(_ input: Operations.EndActivity.Input) async throws -> Operations.EndActivity.Output {
        let body = switch input.body { case .json(let body): body }
        let outcome = await submit(.end, activity: input.path.activityId, idempotencyKey: input.headers.idempotencyKey, body: body)
        return try Self.answer(outcome, accepted: { .accepted(.init(body: .json($0))) }, badRequest: { .badRequest($0) }, unavailable: { .serviceUnavailable($0) })
    }

    /// Turns a request into a command with the `commands` topic's decoder and produces it.
    func submit(
        _ event: ActivityEvent, activity: String, idempotencyKey: String?, body: some Encodable & Sendable
    ) async -> Outcome<Components.Schemas.CommandAccepted> {
        let command: ActivityCommand
        switch Self.command(event, activity: activity, idempotencyKey: idempotencyKey, body: body, makeID: makeID, apps: apps) {
        case .success(let made): command = made
        case .failure(let error): return .invalid(error)
        }
        return await submit(command)
    }

    /// Checks a command made from any request shape against what the
    /// worker knows of its activity and produces it to `commands`.
    func submit(_ command: ActivityCommand) async -> Outcome<Components.Schemas.CommandAccepted> {
        if let refusal = await admit(command) { return .refused(refusal) }
        let id = command.id ?? ""
        if let failure = await send(topics.commands, key: command.activityID.rawValue, value: command.json) {
            accepted.withLock { $0.withdraw(command) }
            return .unavailable(failure)
        }
        return .accepted(.init(
            commandId: id, activityId: command.activityID.rawValue, event: .init(rawValue: command.event.rawValue) ?? .update))
    }

    /// The command a request stands for, or the 400 naming each bad field.
    static func command(
        _ event: ActivityEvent, activity: String, idempotencyKey: String?, body: some Encodable, makeID: () -> String,
        apps: AppDirectory = .unchecked
    ) -> Result<ActivityCommand, APIError> {
        if let idempotencyKey, !isValidIdempotencyKey(idempotencyKey) {
            return .failure(.invalid("the request is not valid", problems: [.init(
                pointer: "#/parameters/Idempotency-Key", message: "expected 1 to 200 printable ASCII characters")]))
        }
        guard case .object(var fields) = encoded(body) else {
            return .failure(.invalid("expected a JSON object", problems: [.init(pointer: "", message: "expected a JSON object")]))
        }
        // Braze's `notification: {alert: {title, body}, sound}` is the command's `alert`.
        let notification = fields.removeValue(forKey: "notification")
        if let notification {
            if fields["alert"] != nil {
                return .failure(.invalid("the request is not valid", problems: [.init(pointer: "/notification", message: "give notification or alert, not both")]))
            }
            var alert = notification["alert"]?.objectValue ?? [:]
            if let sound = notification["sound"] { alert["sound"] = sound }
            fields["alert"] = .object(alert)
        }
        fields["activity_id"] = .string(activity)
        fields["event"] = .string(event.rawValue)
        fields["id"] = .string(idempotencyKey ?? makeID())
        do {
            return .success(try ActivityCommand(json: .object(fields), apps: apps))
        } catch {
            return .failure(.invalid("the request is not valid", problems: [problem(error, notification: notification != nil)]))
        }
    }

    // MARK: Tokens

    func registerToken(_ input: Operations.RegisterToken.Input) async throws -> Operations.RegisterToken.Output {
        let body = switch input.body { case .json(let body): body }
        guard case .object(var fields) = Self.encoded(body) else {
            return .badRequest(.init(body: .json(APIError.invalid("expected a JSON object").body)))
        }
        fields["action"] = .string(TokenRegistration.Action.register.rawValue)
        return try Self.answer(
            await submit(registration: .object(fields)),
            accepted: { .accepted(.init(body: .json($0))) }, badRequest: { .badRequest($0) }, unavailable: { .serviceUnavailable($0) })
    }

    func unregisterToken(_ input: Operations.UnregisterToken.Input) async throws -> Operations.UnregisterToken.Output {
        // The query's parameters as the fields of a `tokens` record, read by
        // its decoder: it names what is missing for the token's kind.
        let query = input.query
        var fields: [String: JSONValue] = [
            "token": .string(input.path.token), "action": .string(TokenRegistration.Action.unregister.rawValue),
        ]
        let given: [(String, String?)] = [
            ("kind", query.kind?.rawValue), ("activity_id", query.activityId), ("audience", query.audience),
            ("attributes_type", query.attributesType), ("environment", query.environment?.rawValue),
        ]
        for case (let name, let value?) in given { fields[name] = .string(value) }
        return try Self.answer(
            await submit(registration: .object(fields), inParameters: true),
            accepted: { .accepted(.init(body: .json($0))) }, badRequest: { .badRequest($0) }, unavailable: { .serviceUnavailable($0) })
    }

    /// Reads a registration with the `tokens` topic's decoder and produces it.
    func submit(registration json: JSONValue, inParameters: Bool = false) async -> Outcome<Components.Schemas.TokenAccepted> {
        let record: TokenRecord
        do {
            record = try TokenRecord(json: json, apps: apps)
        } catch {
            let pointer = inParameters ? "#/parameters/\(error.field)" : JSONPointer.make(error.field.split(separator: ".").map(String.init))
            return .invalid(.invalid("the request is not valid", problems: [.init(pointer: error.field.isEmpty ? "" : pointer, message: error.message)]))
        }
        if let refusal = Self.typeRefusal(record, types: rules().types, inParameters: inParameters) { return .refused(refusal) }
        // Key: the activity id, or the audience key of a push-to-start token.
        if let failure = await send(topics.tokens, key: record.key, value: record.json) { return .unavailable(failure) }
        return switch record {
        case .update(let registration):
            .accepted(.init(
                activityId: registration.activityID.rawValue, token: registration.token.hex,
                action: registration.action == .register ? .register : .unregister))
        case .pushToStart(let registration):
            .accepted(.init(
                audience: registration.audience.rawValue, token: registration.token.hex,
                action: registration.action == .register ? .register : .unregister))
        }
    }

    // MARK: Helpers

    /// An outcome as one operation's own `Output`: its 202, 400 and 503 cases.
    static func answer<Accepted, Output>(
        _ outcome: Outcome<Accepted>, accepted: (Accepted) -> Output,
        badRequest: (Components.Responses.BadRequest) -> Output, unavailable: (Components.Responses.Unavailable) -> Output
    ) throws(APIError) -> Output {
        switch outcome {
        case .accepted(let body): accepted(body)
        case .invalid(let error): badRequest(.init(body: .json(error.body)))
        case .unavailable(let error): unavailable(.init(headers: .init(retryAfter: error.retryAfter ?? 1), body: .json(error.body)))
        case .refused(let error): throw error
        }
    }

    /// Produces a record; nil once Kafka acknowledged it, else the 503 to answer.
    private func send(_ topic: String, key: String, value: JSONValue) async -> APIError? {
        do {
            try await produce(topic, Array(key.utf8), value.serialized())
            return nil
        } catch {
            return APIError(
                status: .serviceUnavailable, code: "unavailable",
                message: "Kafka did not acknowledge the record (\(error)); nothing was accepted, retry later", retryAfter: 1)
        }
    }

    /// The JSON a generated body type stands for, as the Kafka decoders read it.
    static func encoded(_ body: some Encodable) -> JSONValue {
        guard let data = try? JSONEncoder().encode(body), let value = try? JSONValue.parse(Array(data)) else { return .null }
        return value
    }

    /// A decoder's field error as a problem: body fields as JSON pointers,
    /// the path's activity id and the idempotency key as parameters.
    static func problem(_ error: FieldError, notification: Bool) -> Components.Schemas.Problem {
        // `audiences[1]` is the pointer `/audiences/1`.
        var components = error.field.split(separator: ".").flatMap { part in
            part.split(separator: "[").map { $0.hasSuffix("]") ? String($0.dropLast()) : String($0) }
        }
        switch components.first {
        case "activity_id": return .init(pointer: "#/parameters/activity_id", message: error.message)
        case "id": return .init(pointer: "#/parameters/Idempotency-Key", message: error.message)
        case "alert" where notification:
            components = ["notification"] + (components.count > 1 && components[1] != "sound" ? ["alert"] : []) + components.dropFirst()
        default: break
        }
        return .init(pointer: JSONPointer.make(components), message: error.message)
    }

    /// Why the dispatcher would refuse `command`, as the answer to give
    /// now instead of a dead letter the caller never sees: 422 when it
    /// names another app than its activity's or does not fit its
    /// activity's type, 413 when its push is over APNs' size limit. Each is
    /// judged on the activity's state as this worker holds it with the
    /// commands it accepted and has not seen applied (``AcceptedCommands``);
    /// without a whole state, a start (or a command that replaces the
    /// state) is judged whole and a merge patch by the fields it names.
    /// (What only the merged state shows is still dead-lettered by the
    /// worker that holds it.)
    static func refusal(_ command: ActivityCommand, current: ActivityState?, types: ActivityTypes) -> APIError? {
        refusal(command, projection: .init(state: current, isWhole: current != nil, hasPending: false), types: types)
    }

    static func refusal(_ command: ActivityCommand, projection: AcceptedCommands.Projection, types: ActivityTypes) -> APIError? {
        let now = UnixTime(seconds: Date().timeIntervalSince1970)
        let current = projection.isWhole ? projection.state : nil
        if let appRefusal = appRefusal(command, current: projection.state) { return appRefusal }
        if let typeRefusal = types.refusal(of: command, current: current, now: now) {
            return APIError(
                status: .unprocessableContent, code: typeRefusal.reason.rawValue,
                message: "the \(command.event.rawValue) \(typeRefusal.message); nothing was sent",
                problems: typeRefusal.problems.map { problem($0, notification: false) })
        }
        return payloadRefusal(command, current: projection.state, pending: projection.hasPending)
    }

    /// The 413 for a command whose push is over APNs' size limit, merged into
    /// the activity's `current` state when this worker holds it, else
    /// applied to an activity with no state yet: the dispatcher would
    /// dead-letter it `payload-too-large` where the caller never sees it.
    /// (An update that fits alone but not merged into a large state another
    /// worker holds is still dead-lettered there.)
    private static func payloadRefusal(_ command: ActivityCommand, current: ActivityState?, pending: Bool) -> APIError? {
        var probe = Coalescer()
        let now = UnixTime(seconds: Date().timeIntervalSince1970)
        var offset: Int64 = 0
        if let current {
            probe.restore(current)
            offset = (current.lastOffset ?? -1) &+ 1
        } else if command.event != .start {
            // An activity with an empty state, so that an end has something to end.
            probe.restore(ActivityState(activityID: command.activityID, createdAt: now))
        }
        guard case .reject(.payloadTooLarge, _, let details) = probe.receive(command, offset: offset, recordTime: now, now: now) else { return nil }
        let size = details["size"]?.integerValue ?? 0, limit = details["limit"]?.integerValue ?? Int64(APNsPayload.deviceLimit)
        let merged = current == nil ? "" : pending ? " merged into the activity's state and the commands accepted before it" : " merged into the activity's current state"
        return APIError(
            status: .contentTooLarge, code: "payload-too-large",
            message: "the push this \(command.event.rawValue) makes\(merged) is \(size) bytes, over APNs' limit of \(limit) bytes; shrink its content_state, attributes or alert",
            problems: [.init(pointer: "/content_state", message: "the push would be \(size) bytes; the limit is \(limit)")])
    }

    /// 1 to 200 printable ASCII characters.
    static func isValidIdempotencyKey(_ key: String) -> Bool {
        (1...200).contains(key.utf8.count) && key.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
