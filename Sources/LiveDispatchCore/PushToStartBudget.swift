/// Decides whether a push-to-start token may be sent a start: never two
/// starts of one activity to one token (a second start would put a second
/// copy of the activity on the Lock Screen), and at most
/// ``Configuration/maxStartsPerHour`` starts per token in any hour (Apple
/// gives push-to-start a small budget and drops what exceeds it).
///
/// A value type: ``admit(_:activity:now:)`` is the input and returns the
/// decision; time is passed in. A start it admits is recorded at once in
/// the token's ``Ledger``, which the dispatcher persists with the token in
/// `token-store` before sending, so neither a restart nor a re-delivered
/// start repeats it.
public struct PushToStartBudget: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Starts one push-to-start token may be sent in any sliding hour.
        public var maxStartsPerHour: Int
        /// Starts remembered per token (the newest); never fewer than
        /// ``maxStartsPerHour``, so the hour's count is always exact.
        public var rememberedStarts: Int

        public init(maxStartsPerHour: Int = 10, rememberedStarts: Int = 128) {
            self.maxStartsPerHour = max(1, maxStartsPerHour)
            self.rememberedStarts = max(self.maxStartsPerHour, rememberedStarts)
        }
    }

    /// One start sent to a token.
    public struct Start: Sendable, Hashable {
        public var activityID: ActivityID
        public var at: UnixTime

        public init(activityID: ActivityID, at: UnixTime) {
            self.activityID = activityID
            self.at = at
        }
    }

    /// The starts a token was sent, oldest first: what `token-store` keeps
    /// beside the registration (`"started": [{"activity_id", "at"}]`).
    public struct Ledger: Sendable, Hashable {
        public var starts: [Start]

        public init(starts: [Start] = []) { self.starts = starts }

        public var json: JSONValue {
            .array(starts.map { .object(["activity_id": .string($0.activityID.rawValue), "at": .double($0.at.seconds)]) })
        }

        /// Reads the stored form; entries that do not read are skipped (the
        /// changelog is the worker's own, and a bad entry must not lose the token).
        public init(json: JSONValue) {
            starts = (json.arrayValue ?? []).compactMap { entry in
                guard let reader = try? FieldReader(entry, what: "a start"),
                      let activity = try? reader.requiredActivityID("activity_id"),
                      let at = try? reader.date("at")
                else { return nil }
                return Start(activityID: activity, at: at)
            }
        }
    }

    public enum Decision: Sendable, Hashable {
        /// Send the start; it is recorded in the token's ledger.
        case start
        /// The token was already sent a start of this activity.
        case alreadyStarted(at: UnixTime)
        /// The token had `starts` starts in the past hour, the limit: the
        /// next one is allowed at `nextAllowedAt`.
        case rateLimited(starts: Int, limit: Int, nextAllowedAt: UnixTime)
    }

    public let configuration: Configuration
    private var ledgers: [DeviceToken: Ledger] = [:]

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The ledger of `token`, empty when it was never sent a start.
    public func ledger(of token: DeviceToken) -> Ledger { ledgers[token] ?? Ledger() }

    /// Whether `token` may be sent a start of `activity` at `now`; an
    /// admitted start is recorded.
    public mutating func admit(_ token: DeviceToken, activity: ActivityID, now: UnixTime) -> Decision {
        var ledger = ledgers[token] ?? Ledger()
        if let earlier = ledger.starts.first(where: { $0.activityID == activity }) {
            return .alreadyStarted(at: earlier.at)
        }
        let hourAgo = now + -3600
        let recent = ledger.starts.filter { $0.at > hourAgo }
        if recent.count >= configuration.maxStartsPerHour {
            // The oldest start inside the window leaves it first.
            let oldest = recent.map(\.at).min() ?? now
            return .rateLimited(starts: recent.count, limit: configuration.maxStartsPerHour, nextAllowedAt: oldest + 3600)
        }
        ledger.starts.append(Start(activityID: activity, at: now))
        if ledger.starts.count > configuration.rememberedStarts {
            ledger.starts.removeFirst(ledger.starts.count - configuration.rememberedStarts)
        }
        ledgers[token] = ledger
        return .start
    }

    /// Installs a ledger read back from `token-store`, merged with what is
    /// known of the token (it may be stored under several audiences).
    public mutating func restore(_ token: DeviceToken, _ ledger: Ledger) {
        guard !ledger.starts.isEmpty else { return }
        var merged = ledgers[token] ?? Ledger()
        for start in ledger.starts where !merged.starts.contains(start) { merged.starts.append(start) }
        merged.starts.sort { $0.at < $1.at }
        if merged.starts.count > configuration.rememberedStarts {
            merged.starts.removeFirst(merged.starts.count - configuration.rememberedStarts)
        }
        ledgers[token] = merged
    }

    /// Forgets a token that is gone (unregistered or refused by APNs).
    public mutating func forget(_ token: DeviceToken) {
        ledgers.removeValue(forKey: token)
    }

    /// Tokens with a ledger.
    public var count: Int { ledgers.count }
}
