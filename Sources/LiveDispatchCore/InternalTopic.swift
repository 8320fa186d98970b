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

    /// Whether the topic is a compacted changelog.
    public var isCompacted: Bool {
        switch self {
        case .state, .tokenStore, .channels: true
        case .commands, .tokens, .deadLetters, .starts: false
        }
    }

    /// The topics that must have the same partition count.
    public static let coPartitioned: [InternalTopic] = [.commands, .tokens, .state, .tokenStore, .starts, .channels]
}
