/// What a partition's owner answers reads with, from the machine's memory:
/// the same facts the `state` and `token-store` changelogs hold, copied out
/// in pages so a read holds the partition's lock only as long as the copy.
extension PartitionDispatcher {
    /// A page of tokens sorted by their hex, after a cursor.
    public struct TokenPage<Item: Sendable>: Sendable {
        /// Every token, all pages together.
        public var count: Int
        public var items: [Item]
        /// The last token of this page when more follow (the next page's cursor).
        public var next: String?

        public init(count: Int, items: [Item], next: String?) {
            self.count = count
            self.items = items
            self.next = next
        }
    }

    /// One activity as its owner holds it.
    public struct ActivityRead: Sendable {
        /// The merged state (nil when the activity has tokens and no state yet).
        public var state: ActivityState?
        /// Completed pushes, newest first.
        public var pushes: [PushSummary]
        /// Registrations, each with the failure its record names (`lastOutcome`).
        public var tokens: TokenPage<TokenRegistration>

        public init(state: ActivityState?, pushes: [PushSummary], tokens: TokenPage<TokenRegistration>) {
            self.state = state
            self.pushes = pushes
            self.tokens = tokens
        }
    }

    /// One push-to-start token of an audience and the starts it was sent.
    public struct AudienceToken: Sendable {
        public var registration: PushToStartRegistration
        public var ledger: PushToStartBudget.Ledger

        public init(registration: PushToStartRegistration, ledger: PushToStartBudget.Ledger) {
            self.registration = registration
            self.ledger = ledger
        }
    }

    /// One activity of a list.
    public struct ActivityListEntry: Sendable {
        public var state: ActivityState
        public var lastPush: PushSummary?
        public var tokens: Int

        public init(state: ActivityState, lastPush: PushSummary?, tokens: Int) {
            self.state = state
            self.lastPush = lastPush
            self.tokens = tokens
        }
    }

    /// The activity's state, pushes and a page of its tokens; nil when the
    /// partition holds neither a state nor a token of it.
    public func read(activity: ActivityID, tokensAfter cursor: String?, limit: Int) -> ActivityRead? {
        let state = coalescer.state(of: activity)
        let tokens = tokenPage(of: activity, after: cursor, limit: limit)
        guard state != nil || tokens.count > 0 else { return nil }
        return ActivityRead(state: state, pushes: activities.pushes(of: activity).reversed(), tokens: tokens)
    }

    /// A page of the activity's update tokens, sorted by hex.
    public func tokenPage(of activity: ActivityID, after cursor: String?, limit: Int) -> TokenPage<TokenRegistration> {
        guard let table = activities.registrations[activity] else { return TokenPage(count: 0, items: [], next: nil) }
        let (page, next) = Self.page(table.tokens, after: cursor, limit: limit)
        let items = page.compactMap { token -> TokenRegistration? in
            guard let registered = table[token] else { return nil }
            let failure: TokenOutcome? = if case .failed(let outcome) = registered.recorded { outcome } else { nil }
            return registered.registration(activity, token, outcome: failure)
        }
        return TokenPage(count: table.count, items: items, next: next)
    }

    /// A page of the audience's push-to-start tokens with their ledgers, sorted by hex.
    public func audiencePage(of audience: AudienceKey, after cursor: String?, limit: Int) -> TokenPage<AudienceToken> {
        guard let tokens = audienceStarts.audiences[audience] else { return TokenPage(count: 0, items: [], next: nil) }
        let (page, next) = Self.page(Array(tokens.keys), after: cursor, limit: limit)
        let items = page.compactMap { token -> AudienceToken? in
            guard let held = tokens[token] else { return nil }
            return AudienceToken(registration: held.registration(audience, token), ledger: audienceStarts.budget.ledger(of: token))
        }
        return TokenPage(count: tokens.count, items: items, next: next)
    }

    /// The ids of the activities whose id contains `text` (all without it), unsorted.
    public func activityIDs(containing text: String?) -> [ActivityID] {
        guard let text, !text.isEmpty else { return Array(coalescer.entries.keys) }
        return coalescer.entries.keys.filter { $0.rawValue.contains(text) }
    }

    /// What a list shows of an activity; nil when the partition does not hold it.
    public func listEntry(_ activity: ActivityID) -> ActivityListEntry? {
        guard let state = coalescer.state(of: activity) else { return nil }
        return ActivityListEntry(
            state: state, lastPush: activities.pushes(of: activity).last, tokens: activities.registrations[activity]?.count ?? 0)
    }

    /// The tokens after `cursor` (a hex token) in hex order, at most `limit`,
    /// and the cursor of the next page when more follow.
    static func page(_ tokens: [DeviceToken], after cursor: String?, limit: Int) -> (page: [DeviceToken], next: String?) {
        let sorted = tokens.map { ($0.hex, $0) }.sorted { $0.0 < $1.0 }
        let start = cursor.map { cursor in sorted.firstIndex { $0.0 > cursor } ?? sorted.count } ?? 0
        let page = sorted[start...].prefix(max(0, limit))
        return (page.map(\.1), start + page.count < sorted.count ? page.last?.0 : nil)
    }
}
