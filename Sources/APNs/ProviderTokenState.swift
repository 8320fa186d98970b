import LiveDispatchCore

/// When to sign a new provider token: a value-type state machine, the time
/// passed in.
///
/// One token is shared by every connection of a pool. It is renewed when it
/// reaches ``renewalAge`` (50 min, before Apple's 60 min expiry) and never
/// sooner than ``minimumAge`` (20 min) after the previous one, so no
/// connection sees two token changes within 20 minutes
/// (`TooManyProviderTokenUpdates`). An `ExpiredProviderToken` answer renews
/// early, within that same limit.
public struct ProviderTokenState: Sendable, Hashable {
    public static let renewalAge: Double = 50 * 60
    public static let minimumAge: Double = 20 * 60
    /// How far the time given may lie before the token's issue time without
    /// a new token being signed. Callers read the clock before they take the
    /// pool's lock, so two requests can arrive in the other order by a few
    /// milliseconds; signing again for that would switch the token on open
    /// connections (`TooManyProviderTokenUpdates`). Only a clock stepped back
    /// by more than this signs again, so the token's `iat` is never far in
    /// the future.
    public static let backwardsTolerance: Double = 60

    /// The token in use and when it was issued.
    public private(set) var current: (token: String, issuedAt: UnixTime)?
    /// How many tokens were signed.
    public private(set) var renewals = 0

    public init() {}

    public enum Action: Sendable, Hashable {
        /// Send with this token.
        case use(String)
        /// Sign a token issued at this time, then call ``signed(_:issuedAt:)``.
        case sign(issuedAt: UnixTime)
    }

    /// The token for a request sent now.
    public mutating func tokenForRequest(now: UnixTime) -> Action {
        guard let current else { return .sign(issuedAt: now) }
        if now - current.issuedAt >= Self.renewalAge || current.issuedAt - now > Self.backwardsTolerance {
            return .sign(issuedAt: now)
        }
        return .use(current.token)
    }

    /// Records a token just signed.
    public mutating func signed(_ token: String, issuedAt: UnixTime) {
        current = (token, issuedAt)
        renewals += 1
    }

    public enum ExpiredAction: Sendable, Hashable {
        /// A newer token than the rejected one exists already: retry with it.
        case retry(String)
        /// Sign a new token issued now and retry with it.
        case sign(issuedAt: UnixTime)
        /// The token was too young to be expired: the clock is wrong or
        /// something else is; renewing again would earn
        /// `TooManyProviderTokenUpdates`.
        case refuse
    }

    /// APNs answered `ExpiredProviderToken` to a request sent with `token`.
    public mutating func expiredReported(token: String, now: UnixTime) -> ExpiredAction {
        guard let current else { return .sign(issuedAt: now) }
        if current.token != token { return .retry(current.token) }
        if now - current.issuedAt >= Self.minimumAge { return .sign(issuedAt: now) }
        return .refuse
    }

    public static func == (lhs: ProviderTokenState, rhs: ProviderTokenState) -> Bool {
        lhs.current?.token == rhs.current?.token && lhs.current?.issuedAt == rhs.current?.issuedAt
            && lhs.renewals == rhs.renewals
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(current?.token)
        hasher.combine(current?.issuedAt)
        hasher.combine(renewals)
    }
}
