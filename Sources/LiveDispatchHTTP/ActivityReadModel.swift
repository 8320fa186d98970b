import LiveDispatchCore
import LiveDispatchWorker

/// What Kafka holds of one activity, built from its partition of the
/// compacted `state` and `token-store` topics read in offset order: the last
/// snapshot wins, a tombstone removes, and the same holds per token.
struct ActivityReadModel: Sendable {
    let activityID: String
    /// The latest snapshot, nil before the first or after a tombstone.
    private(set) var state: JSONValue?
    /// Registrations by token (hex), the latest of each.
    private(set) var tokens: [String: JSONValue] = [:]

    init(activityID: String) { self.activityID = activityID }

    /// Takes one record of the activity's `state` partition.
    mutating func stateRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key, String(decoding: key, as: UTF8.self) == activityID else { return }
        guard let value else {
            state = nil
            return
        }
        if let json = try? JSONValue.parse(value), case .object = json { state = json }
    }

    /// Takes one record of the activity's `token-store` partition (key: activity id, U+001F, token).
    mutating func tokenStoreRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key else { return }
        let text = String(decoding: key, as: UTF8.self)
        let prefix = activityID + "\u{1F}"
        guard text.hasPrefix(prefix) else { return }
        let token = String(text.dropFirst(prefix.count))
        guard let value else {
            tokens[token] = nil
            return
        }
        if let json = try? JSONValue.parse(value), case .object = json { tokens[token] = json }
    }

    /// Whether Kafka holds anything of the activity.
    var isKnown: Bool { state != nil || !tokens.isEmpty }

    /// The snapshot's version, when it has one that fits.
    var version: Int? { state?["version"]?.integerValue.flatMap { Int(exactly: $0) } }

    var isEnded: Bool { state?["ended_at"].map { !$0.isNull } ?? false }

    /// What the Lock Screen shows for the snapshot's content-state, when it is a valid state.
    var lockScreen: String? { state.flatMap { try? ActivityState(json: $0) }.map(LockScreen.render) }

    /// The snapshot's push history, newest first.
    var pushes: [PushSummary] { state.map { PushSummary.history(of: $0).reversed() } ?? [] }

    /// One token of a page: its registration as on `token-store` and the
    /// outcome to show for it (recorded, or derived from the push history).
    struct TokenEntry: Sendable {
        let token: String
        let registration: JSONValue
        let outcome: TokenOutcome?
        /// Whether `outcome` comes from the push history, not the token's record.
        let derived: Bool
    }

    /// The registrations after `cursor` (a token, lowercase hex), sorted by
    /// token, at most `limit`; and the cursor of the next page when more follow.
    func tokenPage(after cursor: String?, limit: Int) -> (entries: [TokenEntry], next: String?) {
        let (page, next) = tokens.keys.sorted().page(after: cursor, limit: limit)
        let latestPush = pushes.first
        let entries = page.compactMap { token -> TokenEntry? in
            guard let registration = tokens[token] else { return nil }
            let stored = try? TokenRegistration(json: registration)
            let recorded = stored?.lastOutcome
            let outcome = TokenOutcome.shown(recorded: recorded, registeredAt: stored?.registeredAt, latestPush: latestPush)
            return TokenEntry(token: token, registration: registration, outcome: outcome, derived: outcome != nil && outcome != recorded)
        }
        return (entries, next)
    }
}

extension Array where Element: Comparable {
    /// The index of the first element for which `isAfter` holds, in an
    /// array sorted so that it holds for a suffix.
    func partitionPoint(_ isAfter: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            if isAfter(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// The elements after `cursor` (all without one), at most `limit`, and
    /// the cursor of the next page (nil on the last).
    func page(after cursor: Element?, limit: Int) -> (page: ArraySlice<Element>, next: Element?) {
        let start = cursor.map { cursor in partitionPoint { $0 > cursor } } ?? 0
        let page = self[start...].prefix(Swift.max(0, limit))
        return (page, start + page.count < count ? page.last : nil)
    }
}
