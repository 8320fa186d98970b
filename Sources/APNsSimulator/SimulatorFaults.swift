import LiveDispatchCore

/// Misbehaviour the simulator can be told to show, to test how a client
/// copes. Every fault is off by default. Counts named "per connection"
/// restart on each connection; the others run over the whole server.
public struct SimulatorFaults: Sendable, Hashable {
    /// Share (0...1) of otherwise accepted pushes answered with one of
    /// `errorStatuses` instead of 200.
    public var errorRate: Double
    /// Statuses for `errorRate`, chosen evenly: 429, 500 and/or 503.
    public var errorStatuses: [Int]
    /// When set, the `errorRate` draw of the n-th request over the server is
    /// the n-th number of a generator seeded with it (``draw(sequence:)``):
    /// the same seed fails the same requests of an arrival order, run after
    /// run. Without it each connection draws from the system's randomness.
    public var seed: UInt64?
    /// A cycle applied to otherwise accepted pushes in arrival order over
    /// the server: 200 lets the push through, 429/500/503 answer with that.
    /// `[503, 200, 200]` fails the first push of every three.
    public var errorSchedule: [Int]
    /// Per connection: after this many streams, send GOAWAY whose
    /// last-stream-id is that stream; later streams are not processed.
    public var goAwayAfterStreams: Int?
    /// Every this-many-th request over the server is reset `REFUSED_STREAM`.
    public var refuseStreamEvery: Int?
    /// Per connection: when this many requests have arrived, close the TCP
    /// connection at once, leaving requests in flight unanswered.
    public var resetConnectionAfterRequests: Int?
    /// Delay added before every response, in milliseconds.
    public var latencyMilliseconds: Int64
    /// Device tokens (lowercase hex) answered 410 `Unregistered`, with the
    /// time (Unix milliseconds) the token stopped being valid.
    public var unregisteredTokens: [String: Int64]
    /// After a push answered other than 200 (refused by the rules or an
    /// injected status), drop the connection's stream limit to 1 and reset
    /// its other pending streams `REFUSED_STREAM`, until a push succeeds.
    public var dropToOneStreamAfterRejection: Bool
    /// `retry-after` (seconds) sent with injected 429 and 503 answers.
    public var retryAfterSeconds: Int?

    public init(
        errorRate: Double = 0, errorStatuses: [Int] = [429, 500, 503], seed: UInt64? = nil, errorSchedule: [Int] = [],
        goAwayAfterStreams: Int? = nil, refuseStreamEvery: Int? = nil, resetConnectionAfterRequests: Int? = nil,
        latencyMilliseconds: Int64 = 0, unregisteredTokens: [String: Int64] = [:],
        dropToOneStreamAfterRejection: Bool = false, retryAfterSeconds: Int? = nil
    ) {
        self.errorRate = errorRate
        self.errorStatuses = errorStatuses
        self.seed = seed
        self.errorSchedule = errorSchedule
        self.goAwayAfterStreams = goAwayAfterStreams
        self.refuseStreamEvery = refuseStreamEvery
        self.resetConnectionAfterRequests = resetConnectionAfterRequests
        self.latencyMilliseconds = latencyMilliseconds
        self.unregisteredTokens = unregisteredTokens
        self.dropToOneStreamAfterRejection = dropToOneStreamAfterRejection
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// Statuses a fault may answer with.
    public static let injectableStatuses: Set<Int> = [429, 500, 503]

    /// Checks ranges; the message names the faulty setting.
    public func validate() throws(SimulatorError) {
        guard (0...1).contains(errorRate) else {
            throw .invalidConfiguration("error rate \(errorRate) is not between 0 and 1")
        }
        for status in errorStatuses where !Self.injectableStatuses.contains(status) {
            throw .invalidConfiguration("error status \(status) is not one of 429, 500, 503")
        }
        if errorRate > 0 && errorStatuses.isEmpty {
            throw .invalidConfiguration("an error rate needs at least one error status")
        }
        for status in errorSchedule where status != 200 && !Self.injectableStatuses.contains(status) {
            throw .invalidConfiguration("error schedule entry \(status) is not one of 200, 429, 500, 503")
        }
        for (name, value) in [
            ("GOAWAY after streams", goAwayAfterStreams), ("refuse stream every", refuseStreamEvery),
            ("reset connection after requests", resetConnectionAfterRequests),
        ] {
            if let value, value < 1 { throw .invalidConfiguration("\(name) must be at least 1, not \(value)") }
        }
        if let retryAfterSeconds, !(0...3_600).contains(retryAfterSeconds) {
            throw .invalidConfiguration("retry-after must be between 0 and 3600 seconds, not \(retryAfterSeconds)")
        }
        guard latencyMilliseconds >= 0 else {
            throw .invalidConfiguration("latency must not be negative (\(latencyMilliseconds) ms)")
        }
    }

    /// The seeded draw in `0..<1` for the `sequence`-th request over the
    /// server (counted from 1), or nil without a ``seed``: the value a
    /// `SplitMix64(seed:)` gives on its `sequence`-th `unit()`.
    public func draw(sequence: Int) -> Double? {
        guard let seed else { return nil }
        let skipped = UInt64(truncatingIfNeeded: max(sequence, 1) - 1)
        var generator = SplitMix64(seed: seed &+ skipped &* SplitMix64.increment)
        return generator.unit()
    }

    /// The APNs reason sent with an injected status.
    static func reason(for status: Int) -> String {
        switch status {
        case 429: "TooManyRequests"
        case 500: "InternalServerError"
        default: "ServiceUnavailable"
        }
    }
}
