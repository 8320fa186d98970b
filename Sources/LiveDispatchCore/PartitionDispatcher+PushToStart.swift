/// Push-to-start: the records of `tokens` and `starts` that
/// ``AudienceStarts`` decides on, and the writes it asks for.
extension PartitionDispatcher {
    /// The push-to-start tokens of `audience`, sorted.
    public func pushToStartTokens(of audience: AudienceKey) -> [DeviceToken] {
        audienceStarts.tokens(of: audience)
    }

    /// A push-to-start registration read from `tokens` (already accepted).
    mutating func pushToStartRecord(_ registration: PushToStartRegistration, offset: Int64, now: UnixTime) -> [Action] {
        let (value, replaced) = audienceStarts.apply(registration, now: now)
        // The replaced tokens' tombstones go first on the same partition, so
        // the offset is complete once the registration's write is.
        var actions: [Action] = []
        for token in replaced {
            actions.append(writes.produce(.tokenStore, key: PushToStartRegistration.storeKey(registration.audience, token), value: nil, then: .nothing))
        }
        actions.append(writes.produce(.tokenStore, key: registration.storeKey, value: value, then: .completeOffsets(.tokens, [offset])))
        return actions
    }

    /// A record of this partition of `starts`.
    public mutating func audienceStartRecord(_ record: Record, now: UnixTime) -> [Action] {
        let start: AudienceStart
        switch accept(.starts, record, what: "audience start", now: now, parse: AudienceStart.init(bytes:), key: { ($0.audience.rawValue, $0.push.activityID) }) {
        case .ready(let value): start = value
        case .handled(let actions): return actions
        }
        let fanOut = FanOut.sharingBudget(start.push.activityID, version: 0, configuration: configuration.fanOut)
        let actions = audienceStarts.begin(start, offset: record.offset, fanOut: fanOut, now: now, writes: &writes)
        return actions + finish(.audienceStart(record.offset), now: now)
    }

    /// A token's ledger is stored: send it the start.
    mutating func startRecorded(_ offset: Int64, _ token: DeviceToken, now: UnixTime) -> [Action] {
        guard let fanOutActions = audienceStarts.recorded(offset, token, now: now) else { return [] }
        return perform(fanOutActions, for: .audienceStart(offset), now: now)
    }
}
