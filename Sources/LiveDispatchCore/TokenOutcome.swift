/// How the last push to one token ended: delivered, or failed for good with
/// APNs' reason; with the version and event it carried and when it ended.
///
/// The dispatcher keeps the write load of outcomes bounded by failures, not
/// by pushes: it writes a token's outcome in its `token-store` record
/// (`last_outcome`) only when the token fails (each failure is a dead letter
/// too) and when a token whose record names a failure is delivered again.
/// A token whose record names no failure, or an older delivery, got every
/// push that completed since it registered: ``shown(recorded:registeredAt:latestPush:)``
/// derives its outcome from the activity's newest push summary.
public struct TokenOutcome: Sendable, Hashable {
    public enum Result: String, Sendable, Hashable, CaseIterable {
        case delivered
        case failed
    }

    public var result: Result
    /// APNs' reason (`BadDeviceToken`, `TooManyRequests`, …) of a failure, at
    /// most ``reasonLength`` characters.
    public var reason: String?
    public var version: UInt64
    /// The push's event: what kind of push it was (`start`, `update`, `end`).
    public var event: ActivityEvent
    public var at: UnixTime

    /// Longest reason kept, in characters (as in push summaries).
    public static let reasonLength = PushSummary.reasonLength

    public init(result: Result, reason: String? = nil, version: UInt64, event: ActivityEvent, at: UnixTime) {
        self.result = result
        self.reason = reason.map { String($0.prefix(Self.reasonLength)) }
        self.version = version
        self.event = event
        self.at = at
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "result": .string(result.rawValue), "version": .integer(Int64(clamping: version)), "kind": .string(event.rawValue),
            "at": .double(at.seconds),
        ]
        if let reason { fields["reason"] = .string(reason) }
        return .object(fields)
    }

    static let fieldNames: Set<String> = ["result", "reason", "version", "kind", "at"]

    /// Reads `last_outcome` as the dispatcher writes it; the reader's path names it in errors.
    init(_ reader: FieldReader) throws(FieldError) {
        try reader.rejectUnknown(Self.fieldNames)
        let resultName = try reader.requiredString("result")
        guard let result = Result(rawValue: resultName) else {
            throw FieldError(field: reader.name("result"), message: "\(String(resultName.prefix(64)).debugDescription) is not an outcome (expected delivered or failed)")
        }
        guard let version = try reader.integer("version"), version >= 0 else {
            throw FieldError(field: reader.name("version"), message: "expected a version of 0 or more")
        }
        let kindName = try reader.requiredString("kind")
        guard let event = ActivityEvent(rawValue: kindName) else {
            throw FieldError(field: reader.name("kind"), message: "\(String(kindName.prefix(64)).debugDescription) is not a push kind (expected start, update or end)")
        }
        guard let at = try reader.date("at") else { throw FieldError(field: reader.name("at"), message: "is required") }
        self.init(result: result, reason: try reader.string("reason"), version: UInt64(version), event: event, at: at)
    }

    public init(json: JSONValue) throws(FieldError) {
        try self.init(FieldReader(json, what: "a token outcome"))
    }

    /// The outcome to show for a token: its recorded failure; else the
    /// newest completed push when it completed after the token registered
    /// and is not older than the recorded delivery (the token got it, or
    /// a failure would be recorded); else the recorded delivery; nil when
    /// no push to the token has ended yet.
    public static func shown(recorded: TokenOutcome?, registeredAt: UnixTime?, latestPush: PushSummary?) -> TokenOutcome? {
        if let recorded, recorded.result == .failed { return recorded }
        if let push = latestPush, push.version >= (recorded?.version ?? 0), registeredAt.map({ $0 <= push.completedAt }) ?? true {
            return TokenOutcome(result: .delivered, version: push.version, event: push.event, at: push.completedAt)
        }
        return recorded
    }
}
