/// The internal topics, without their prefix.
public enum InternalTopic: String, Sendable, CaseIterable {
    case commands
    case tokens
    case state
    case tokenStore = "token-store"
    case deadLetters = "dead-letters"
    /// Starts addressed to audiences, keyed by audience key.
    case starts
    /// Broadcast activities' channels, keyed by activity id (tombstoned
    /// when the channel is deleted).
    case channels
    /// What became of pushes, audience starts and tokens, for backends
    /// (``Outcome``), keyed by activity id.
    case outcomes

    /// Whether the topic is a compacted changelog.
    public var isCompacted: Bool {
        switch self {
        case .state, .tokenStore, .channels: true
        case .commands, .tokens, .deadLetters, .starts, .outcomes: false
        }
    }

    /// The topics a worker cannot start without; `outcomes` is not one of
    /// them: without it outcomes are not published.
    public static let required: [InternalTopic] = allCases.filter { $0 != .outcomes }

    /// The topics that must have the same partition count.
    public static let coPartitioned: [InternalTopic] = [.commands, .tokens, .state, .tokenStore, .starts, .channels]
}
