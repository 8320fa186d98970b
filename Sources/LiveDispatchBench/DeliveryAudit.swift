/// What a device saw, judged against what it should end with: the checks of
/// one row of `livedispatch-bench faults`, computed from the pushes an APNs
/// server accepted, token by token, in the order it accepted them.
///
/// Each delivery carries a `version` that grows with every newer state of
/// its activity (the bench's scenario uses the score) and whether it ended
/// the activity; an end is newer than any update. A delivery is *older after
/// newer* when its token already received a newer state before it (an
/// update after the end included); otherwise it is a *duplicate* when its
/// token already received the same state.
public struct DeliveryAudit: Sendable, Hashable {
    /// A token's last state: the version and whether the activity ended.
    public struct State: Sendable, Hashable, CustomStringConvertible {
        public var version: Int64
        public var ended: Bool

        public init(version: Int64, ended: Bool) {
            self.version = version
            self.ended = ended
        }

        public var description: String { ended ? "v\(version) ended" : "v\(version)" }

        /// Whether `self` comes strictly after `other` in an activity's life.
        func isNewer(than other: State) -> Bool {
            if ended != other.ended { return ended }
            return version > other.version
        }
    }

    private struct TokenRecord: Sendable, Hashable {
        var newest: State?
        var last: State?
        var seen: Set<State> = []
    }

    /// The state each token must end at.
    public let expected: [String: State]
    private var tokens: [String: TokenRecord] = [:]
    /// Deliveries seen, to expected and to unknown tokens.
    public private(set) var deliveries = 0
    /// Deliveries whose state is older than (or as old as an end) one its token already had.
    public private(set) var olderAfterNewer = 0
    /// Deliveries of a state their token had already received.
    public private(set) var duplicates = 0
    /// Deliveries to tokens the scenario does not know.
    public private(set) var unexpected = 0

    public init(expected: [String: State]) {
        self.expected = expected
    }

    /// Records one accepted push of `state` to `token`, in the order received.
    public mutating func record(token: String, state: State) {
        deliveries += 1
        guard expected[token] != nil else {
            unexpected += 1
            return
        }
        var record = tokens[token] ?? TokenRecord()
        if let newest = record.newest, state != newest, !state.isNewer(than: newest) {
            olderAfterNewer += 1
        } else if record.seen.contains(state) {
            duplicates += 1
        }
        if record.newest.map({ state.isNewer(than: $0) }) ?? true { record.newest = state }
        record.seen.insert(state)
        record.last = state
        tokens[token] = record
    }

    /// Tokens whose last delivery is their expected final state.
    public var tokensAtFinalState: Int {
        expected.reduce(0) { count, entry in count + (tokens[entry.key]?.last == entry.value ? 1 : 0) }
    }

    /// Whether every expected token's last delivery is its final state.
    public var everyTokenAtFinalState: Bool { tokensAtFinalState == expected.count }

    /// Duplicate deliveries as a share of all deliveries, in percent (0 when none).
    public var duplicatePercent: Double {
        deliveries == 0 ? 0 : Double(duplicates) * 100 / Double(deliveries)
    }

    /// Tokens not at their final state and not in `deadLettered`: short
    /// with nothing saying why (a silent loss).
    public func tokensShortWithoutDeadLetter(_ deadLettered: Set<String>) -> Int {
        expected.reduce(0) { count, entry in
            count + (tokens[entry.key]?.last != entry.value && !deadLettered.contains(entry.key) ? 1 : 0)
        }
    }

    /// Up to `limit` tokens not at their final state, with what they last received (nil: nothing).
    public func tokensShort(limit: Int) -> [(token: String, last: State?, expected: State)] {
        expected.keys.sorted().lazy
            .filter { self.tokens[$0]?.last != self.expected[$0] }
            .prefix(max(0, limit))
            .compactMap { token in self.expected[token].map { (token, self.tokens[token]?.last, $0) } }
    }
}
