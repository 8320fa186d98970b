import LiveDispatchCore

/// What replaying a dead letter means, decided from the letter (and, for a
/// push failure to an update token, from the token's `token-store` record),
/// without I/O.
///
/// - A letter with an original record produces that record again to its
///   topic, when the worker replays to it and the letter keeps it whole.
/// - A push that failed for good to an update token (`apns-rejected`,
///   `retries-exhausted`) produces a `register` of that token, as stored on
///   `token-store` now (environment, app, expiry), to `tokens`: the owner
///   then sends the device the activity's current state.
/// - Every other letter is refused, with a sentence saying why and what to
///   do instead: a start to a push-to-start token (its ledger keeps the
///   start, or the budget refused it), a broadcast channel's failure, a
///   state over APNs' limit.
struct DeadLetterReplay: Sendable {
    /// A record to produce.
    struct Record: Sendable, Hashable {
        var topic: String
        var key: String
        var value: [UInt8]
    }

    /// Why a letter is not replayed: a stable code and a message for a person.
    struct Refusal: Sendable, Hashable, Error {
        var code: String
        var message: String
    }

    enum Decision: Sendable, Hashable {
        /// Produce this record.
        case produce(Record)
        /// A push to this update token failed: re-register it, from its
        /// `token-store` record (read the activity's partition, then call
        /// ``reregistration(of:activity:token:stored:now:)``).
        case reregister(ActivityID, DeviceToken)
        case refused(Refusal)
    }

    /// The letter's id (`<partition>-<offset>`), for messages.
    var id: String
    /// The `tokens` topic.
    var tokensTopic: String
    /// The topics an original record may be produced to again: those the
    /// rules read, `commands` and `tokens`.
    var replayableTopics: Set<String>
    /// The deployment's apps: a re-registration must name one when there are several.
    var apps: AppDirectory = .unchecked

    /// What replaying `letter` takes.
    func decide(_ letter: DeadLetter) -> Decision {
        if let origin = letter.origin { return original(letter, origin) }
        let activity = letter.activityID.map { "activity \($0)" } ?? "its activity"
        switch letter.reason {
        case .apnsRejected, .retriesExhausted:
            if let channel = letter.details["channel_id"]?.stringValue {
                return refuse(
                    "APNs refused broadcast channel \(channel) of \(activity) for good and its pushes go on to its update tokens; "
                        + "a running activity cannot be given another channel: start the next activity with broadcast, "
                        + "or with a channel from `livedispatch channels create` as its input_push_channel")
            }
            if let audience = letter.details["audience"]?.stringValue {
                let token = letter.token.map { "push-to-start token \($0.hex)" } ?? "a push-to-start token"
                return refuse(
                    "the start of \(activity) to \(token) in audience \(audience) failed for good; the token's ledger keeps that start, "
                        + "and a token is sent at most one start of an activity, so no replay sends it another: "
                        + "start the activity on that device under a new activity id")
            }
            if let activityID = letter.activityID, let token = letter.token { return .reregister(activityID, token) }
        case .startRateLimited:
            let token = letter.token.map { "push-to-start token \($0.hex)" } ?? "a push-to-start token"
            let audience = letter.details["audience"]?.stringValue.map { "audience \($0)" } ?? "its audience"
            let after = letter.details["next_allowed_at"]?.numberValue.map { " after \(UnixTime(seconds: $0).iso8601)" } ?? ""
            return refuse(
                "the start of \(activity) to \(token) was not sent (push_to_start.max_starts_per_hour) and the letter keeps no start to send again; "
                    + "send the start of \(activity) to \(audience) again\(after): tokens already sent it are skipped, this one is sent it")
        case .channelCreateFailed:
            return refuse(
                "a broadcast channel is created only when its activity starts; \(activity) goes on without one, its pushes going to its update tokens: "
                    + "start the next activity with broadcast once APNs creates channels again (an app keeps at most 10,000 per environment; "
                    + "`livedispatch channels list` shows them)")
        case .channelDeleteFailed:
            let channel = letter.details["channel_id"]?.stringValue ?? "(unknown)"
            let environment = letter.details["environment"]?.stringValue.map { " --environment \($0)" } ?? ""
            return refuse(
                "broadcast channel \(channel) of \(activity) is still on APNs: delete it with `livedispatch channels delete \(channel)\(environment)`")
        case .payloadTooLarge:
            return refuse(
                "the state of \(activity) is over APNs' payload limit, so no push can carry it: send an update that makes it smaller")
        default:
            break
        }
        return .refused(Refusal(code: "no-original", message: "dead letter \(id) keeps no original record to replay"))
    }

    /// The `register` of `token` that replays a push failure, as its
    /// `token-store` record says now (`stored`; nil when it has none).
    func reregistration(
        of letter: DeadLetter, activity: ActivityID, token: DeviceToken, stored: TokenRegistration?, now: UnixTime
    ) -> Result<Record, Refusal> {
        guard let stored else {
            return .failure(Refusal(
                code: "token-not-registered",
                message: "token \(token.hex) is no longer registered for activity \(activity) (unregistered, removed by APNs, expired, "
                    + "or the activity is over), so dead letter \(id) has nothing to replay; a device that still shows the activity "
                    + "registers its token again (POST /v1/tokens)"))
        }
        if stored.isExpired(at: now) {
            return .failure(Refusal(
                code: "token-not-registered",
                message: "token \(token.hex) of activity \(activity) expired at \(stored.expiresAt.map(\.iso8601) ?? "?"), so dead letter \(id) "
                    + "has nothing to replay; register it again with a later expires_at (POST /v1/tokens)"))
        }
        let registration = TokenRegistration(
            activityID: activity, token: token, action: .register, environment: stored.environment, expiresAt: stored.expiresAt,
            registeredAt: stored.registeredAt, app: stored.app ?? letter.details["app"]?.stringValue)
        // The record must be one the dispatcher accepts: with several apps it names one.
        do {
            _ = try TokenRegistration(json: registration.json, apps: apps)
        } catch {
            return .failure(Refusal(
                code: "not-replayable",
                message: "the re-registration of token \(token.hex) for activity \(activity) would be refused (\(error.field): \(error.message)); "
                    + "register the token again with POST /v1/tokens"))
        }
        return .success(Record(topic: tokensTopic, key: activity.rawValue, value: registration.json.serialized()))
    }

    /// The letter's original record, unless it is cut or from a topic the worker does not replay to.
    private func original(_ letter: DeadLetter, _ origin: DeadLetter.Origin) -> Decision {
        guard let value = origin.value else {
            return .refused(Refusal(code: "no-original", message: "dead letter \(id) keeps no original record to replay"))
        }
        // A dead letter cut to fit keeps only a prefix of its record:
        // replaying it would replace the event with broken JSON.
        if letter.details["truncated"] == .bool(true) {
            let size = letter.details["value_bytes"]?.integerValue.map { " of \($0) bytes" } ?? ""
            return .refused(Refusal(
                code: "truncated",
                message: "dead letter \(id) keeps only a prefix of its original record\(size); replay it from \(origin.topic) partition \(origin.partition) offset \(origin.offset) instead"))
        }
        guard replayableTopics.contains(origin.topic) else {
            return .refused(Refusal(
                code: "topic-not-replayable", message: "dead letter \(id) came from \(origin.topic), which the worker's rules do not read"))
        }
        return .produce(Record(topic: origin.topic, key: origin.key ?? "", value: Array(value.utf8)))
    }

    private func refuse(_ why: String) -> Decision {
        .refused(Refusal(code: "not-replayable", message: "dead letter \(id) is not replayed: \(why)"))
    }
}

/// The newest `token-store` record of one update token, from records read
/// in offset order (a tombstone forgets it).
struct StoredTokenQuery: Sendable {
    let key: [UInt8]
    private(set) var registration: TokenRegistration?

    init(activity: ActivityID, token: DeviceToken) {
        key = Array(TokenRegistration.storeKey(activity, token).utf8)
    }

    mutating func consider(key: [UInt8]?, value: [UInt8]?) {
        guard key == self.key else { return }
        registration = value.flatMap { try? TokenRegistration(bytes: $0) }
    }
}
