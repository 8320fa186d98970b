/// Sends one activity's pushes to each of its tokens so that a token never
/// receives a state older than one it already got (semantic 2).
///
/// This is where fan-out bookkeeping lives, apart from the ``Coalescer``,
/// which decides what the versions are: FanOut only knows tokens and
/// version numbers. Per token it remembers the newest version done
/// (delivered, or dead-lettered) and the one in flight; at most one send
/// per token is in flight, so responses can never reorder a token's
/// versions. When a newer version is published during a fan-out, tokens
/// not yet sent get the newer one; tokens sent the older one get the newer
/// one after their send completes. Retries always send the newest version.
///
/// It sends each token the versions it is given, whatever their event: its
/// owner decides what a version becomes for a kind of token. An update
/// token is planned a `start` as an update of the same state
/// (``ActivityDeliveries``, semantic 14); push-to-start tokens are sent
/// their start (``AudienceStarts``).
///
/// The retry budget counts the sends of one version to one token: a newer
/// version replacing a failed one starts with a fresh budget.
///
/// ``Action/completed(through:)`` reports when every token has a version at
/// least that new: then every command folded into it is fully dispatched
/// and its offsets may be committed (semantic 7).
public struct FanOut: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Sends in flight at once for this activity.
        public var maxInFlight: Int
        public var retry: RetryPolicy

        public init(maxInFlight: Int = 256, retry: RetryPolicy = RetryPolicy()) {
            self.maxInFlight = max(1, maxInFlight)
            self.retry = retry
        }
    }

    /// How one send ended, as the APNs client classified it.
    public enum Outcome: Sendable, Hashable {
        case delivered
        /// 410 or BadDeviceToken: the token is gone for good.
        case tokenInvalid(reason: String)
        /// A 4xx that no retry can fix.
        case permanent(reason: String)
        /// 429, 5xx, timeouts, resets; `after` is the server's `retry-after`.
        case retryable(reason: String, after: Double?)

        public var isRetryable: Bool {
            if case .retryable = self { true } else { false }
        }
    }

    /// What became of a send once the fan-out took its outcome: what its
    /// owner counts in the push's summary and records for the token.
    public enum Settlement: Sendable, Hashable {
        case delivered
        /// Given up on for this version: the token is gone, APNs refused
        /// the push for good, or its retries ran out.
        case failed(reason: String)
        /// No final answer for its push yet: it is sent again after a
        /// backoff (or dropped, when the fan-out no longer waits for it).
        case undecided

        /// The outcome taken at its word: a retryable failure is retried.
        init(_ outcome: Outcome) {
            switch outcome {
            case .delivered: self = .delivered
            case .tokenInvalid(let reason), .permanent(let reason): self = .failed(reason: reason)
            case .retryable: self = .undecided
            }
        }
    }

    public enum Action: Sendable, Hashable {
        /// Send `push` (the newest version) to `token`, then report with
        /// ``completed(token:version:outcome:now:jitter:)``.
        case send(DeviceToken, LiveActivityPush)
        /// Call ``timerFired(now:)`` at this time (a retry is due).
        case wake(at: UnixTime)
        /// Remove the token for good (tombstone it in `token-store`).
        case removeToken(DeviceToken, reason: String)
        /// Dead-letter this push for this token.
        case deadLetter(DeviceToken, LiveActivityPush, reason: DeadLetterReason, detail: String, attempts: Int)
        /// Every token has a version at least this new.
        case completed(through: UInt64)
    }

    /// Five machine words per token (40 bytes): pushes in flight are held
    /// once per version (``sent``), not per token.
    struct TokenState: Sendable, Hashable {
        /// Newest version delivered or given up on; 0 for none.
        var done: UInt64
        /// The version in flight to this token; 0 for none.
        var inFlightVersion: UInt64 = 0
        /// Sends of `attemptsVersion` to this token so far.
        var attemptsVersion: UInt64 = 0
        private var firstFailure = CompactUnixTime(nil)
        var attempts: Int32 = 0
        var queued = false
        var retrying = false

        init(done: UInt64) { self.done = done }

        var firstFailureAt: UnixTime? {
            get { firstFailure.value }
            set { firstFailure = CompactUnixTime(newValue) }
        }
    }

    public let activityID: ActivityID
    public let configuration: Configuration
    private(set) public var latest: LiveActivityPush?
    private var tokens = TokenTable<TokenState>()
    /// The pushes in flight, by version, with how many tokens they are in flight to.
    private var sent: [UInt64: (push: LiveActivityPush, count: Int)] = [:]
    /// Tokens waiting for a retry, by when it is due.
    private var retries = DeadlineQueue<DeviceToken>()
    private var queuedCount = 0
    /// How many tokens are done at each version: the smallest key is the
    /// version every token has reached.
    private var doneCounts: [UInt64: Int] = [:]
    /// Slots in ``tokens`` waiting for a send. An entry whose token moved
    /// (swap-remove) or was removed is skipped; a queued token that moved is
    /// queued again under its new slot.
    private var ready = FIFOQueue<UInt32>()
    private var inFlightCount = 0
    private var reportedThrough: UInt64
    /// Sends the owner lets this fan-out start before it asks again; each
    /// started send uses one. An owner sharing a budget among many fan-outs
    /// (``PartitionDispatcher``) keeps it at 0 and hands out sends through
    /// ``resume(now:)``; `Int.max` leaves only ``Configuration/maxInFlight``.
    public var allowance = Int.max

    /// - Parameter version: the version every existing token already has
    ///   (a restored snapshot's version, or 0 for a new activity).
    public init(activityID: ActivityID, version: UInt64 = 0, configuration: Configuration = Configuration()) {
        self.activityID = activityID
        self.configuration = configuration
        self.reportedThrough = version
    }

    public var tokenCount: Int { tokens.count }
    public var inFlight: Int { inFlightCount }
    public var registeredTokens: [DeviceToken] { tokens.tokens.sorted() }
    public func contains(_ token: DeviceToken) -> Bool { tokens.slot(of: token) != nil }

    /// Sends of its current version to `token` so far, the one in flight
    /// included; 0 for a token it does not have.
    public func attempts(of token: DeviceToken) -> Int {
        tokens.slot(of: token).map { Int(tokens[slot: $0].attempts) } ?? 0
    }

    /// The version every token has reached (or the latest, with no tokens).
    public var completedThrough: UInt64 { reportedThrough }

    /// A token waits for a send that only the ``allowance`` holds back:
    /// the owner should ``resume(now:)`` it when it has sends to give.
    public var wantsToSend: Bool {
        latest != nil && queuedCount > 0 && inFlightCount < configuration.maxInFlight
    }

    /// True when nothing is in flight, queued or waiting for a retry.
    public var isIdle: Bool {
        inFlightCount == 0 && queuedCount == 0 && retries.count == 0
    }

    /// Installs the push every existing token is taken to hold already (the
    /// state restored from the changelog), so tokens registered later can be
    /// sent it. Nothing is sent now.
    public mutating func restoreLatest(_ push: LiveActivityPush) {
        guard push.version >= reportedThrough, latest == nil else { return }
        latest = push
        reportedThrough = push.version
    }

    /// Adds tokens restored from the changelog: each counts as holding the
    /// latest version (``restoreLatest(_:)``), and nothing is sent. One
    /// call for all of an activity's tokens, in their order.
    public mutating func restoreTokens(_ restored: [DeviceToken]) {
        let done = latest?.version ?? reportedThrough
        tokens.reserveCapacity(tokens.count + restored.count)
        var added = 0
        for token in restored where tokens.insertIfAbsent(token, TokenState(done: done)) { added += 1 }
        if added > 0 { doneCounts[done, default: 0] += added }
    }

    /// Adds a token. With `sendCurrent`, it is sent the latest version (a
    /// device that registers mid-activity catches up); without, it counts as
    /// having it (a token restored from the changelog).
    public mutating func addToken(_ token: DeviceToken, sendCurrent: Bool, now: UnixTime) -> [Action] {
        guard tokens.slot(of: token) == nil else { return [] }
        let latestVersion = latest?.version ?? reportedThrough
        let done = sendCurrent && latest != nil ? latestVersion - 1 : latestVersion
        let slot = tokens.insert(token, TokenState(done: done))
        doneCounts[done, default: 0] += 1
        var actions: [Action] = []
        if done < latestVersion { enqueue(slot) }
        pump(into: &actions)
        reportCompletion(into: &actions)
        return actions
    }

    /// Sends a token it has the latest version again (a registration
    /// repeated, a dead letter replayed, a token registered after the last
    /// snapshot), unless a send to it is under way.
    public mutating func resend(_ token: DeviceToken, now: UnixTime) -> [Action] {
        guard let slot = tokens.slot(of: token), let latest else { return [] }
        return resend(slot: slot, latest.version)
    }

    /// Queues the token at `slot` for `version` again, when nothing is in
    /// flight, queued or waiting for a retry to it.
    private mutating func resend(slot: Int, _ version: UInt64) -> [Action] {
        var state = tokens[slot: slot]
        guard state.inFlightVersion == 0, !state.queued, !state.retrying, version > 0 else { return [] }
        decrement(state.done)
        state.done = min(state.done, version - 1)
        doneCounts[state.done, default: 0] += 1
        tokens[slot: slot] = state
        enqueue(slot)
        var actions: [Action] = []
        pump(into: &actions)
        reportCompletion(into: &actions)
        return actions
    }

    /// Removes a token (unregistered or expired). Its send in flight, if any,
    /// is ignored when it completes; a token re-added meanwhile may have two
    /// sends in flight, the older carrying an older `aps.timestamp`, which
    /// devices ignore.
    public mutating func removeToken(_ token: DeviceToken) -> [Action] {
        guard let slot = tokens.slot(of: token) else { return [] }
        let state = remove(slot: slot)
        decrement(state.done)
        if state.inFlightVersion != 0 {
            inFlightCount -= 1
            release(state.inFlightVersion)
        }
        if state.queued { queuedCount -= 1 }
        if state.retrying { retries.cancel(token) }
        var actions: [Action] = []
        pump(into: &actions)
        reportCompletion(into: &actions)
        return actions
    }

    /// Whether ``publish(_:now:)`` takes `push`: only a version newer than
    /// the latest, or than what every token has.
    public func takes(_ push: LiveActivityPush) -> Bool {
        push.version > (latest?.version ?? reportedThrough)
    }

    /// Publishes a newer version. Older or equal versions are ignored.
    public mutating func publish(_ push: LiveActivityPush, now: UnixTime) -> [Action] {
        guard takes(push) else { return [] }
        latest = push
        for slot in 0..<tokens.count {
            let state = tokens[slot: slot]
            if state.done < push.version && state.inFlightVersion == 0 && !state.queued && !state.retrying { enqueue(slot) }
        }
        var actions: [Action] = []
        pump(into: &actions)
        reportCompletion(into: &actions)
        return actions
    }

    /// A send of `version` to `token` ended with `outcome`. `jitter` in
    /// [0, 1) randomizes the retry backoff.
    public mutating func completed(
        token: DeviceToken, version: UInt64, outcome: Outcome, now: UnixTime, jitter: Double
    ) -> [Action] {
        settle(token: token, version: version, outcome: outcome, now: now, jitter: jitter).actions
    }

    /// ``completed(token:version:outcome:now:jitter:)``, and what became of
    /// the send. A send the fan-out no longer waits for (its token removed
    /// meanwhile, or a version already done) is settled as its outcome
    /// says, and not retried.
    public mutating func settle(
        token: DeviceToken, version: UInt64, outcome: Outcome, now: UnixTime, jitter: Double
    ) -> (settlement: Settlement, actions: [Action]) {
        var settlement = Settlement(outcome)
        guard version != 0, let slot = tokens.slot(of: token), tokens[slot: slot].inFlightVersion == version,
            let base = release(version)
        else { return (settlement, []) }
        var state = tokens[slot: slot]
        let sent = base
        state.inFlightVersion = 0
        inFlightCount -= 1
        var actions: [Action] = []
        switch outcome {
        case .delivered:
            state.attempts = 0
            state.firstFailureAt = nil
            setDone(&state, version)
        case .tokenInvalid(let reason):
            remove(slot: slot)
            if state.queued { queuedCount -= 1 }
            decrement(state.done)
            actions.append(.removeToken(token, reason: reason))
            pump(into: &actions)
            reportCompletion(into: &actions)
            return (settlement, actions)
        case .permanent(let reason):
            state.attempts = 0
            state.firstFailureAt = nil
            setDone(&state, version)
            actions.append(.deadLetter(token, sent, reason: .apnsRejected, detail: reason, attempts: 1))
        case .retryable(let reason, let after):
            let firstFailureAt = state.firstFailureAt ?? now
            state.firstFailureAt = firstFailureAt
            if state.attempts >= configuration.retry.maxAttempts
                || now - firstFailureAt >= configuration.retry.maxElapsed
            {
                let attempts = Int(state.attempts)
                state.attempts = 0
                state.firstFailureAt = nil
                setDone(&state, version)
                settlement = .failed(reason: reason)
                actions.append(.deadLetter(token, sent, reason: .retriesExhausted, detail: reason, attempts: attempts))
            } else {
                let backoff = configuration.retry.delay(attempt: Int(state.attempts), jitter: jitter)
                let retryAt = now + max(backoff, after ?? 0)
                state.retrying = true
                retries.schedule(token, at: retryAt)
                tokens[slot: slot] = state
                actions.append(.wake(at: retryAt))
                pump(into: &actions)
                return (settlement, actions)
            }
        }
        tokens[slot: slot] = state
        if let latest, state.done < latest.version, !state.retrying { enqueue(slot) }
        pump(into: &actions)
        reportCompletion(into: &actions)
        return (settlement, actions)
    }

    /// Retries that are due become sends. Early firings are harmless.
    public mutating func timerFired(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for token in retries.popDue(now: now) {
            guard let slot = tokens.slot(of: token) else { continue }
            tokens[slot: slot].retrying = false
            enqueue(slot)
        }
        pump(into: &actions)
        reportCompletion(into: &actions)
        if let next = retries.next { actions.append(.wake(at: next)) }
        return actions
    }

    /// The next time a retry is due, if any.
    public var nextRetry: UnixTime? {
        mutating get { retries.next }
    }

    private mutating func enqueue(_ slot: Int) {
        guard !tokens[slot: slot].queued else { return }
        tokens[slot: slot].queued = true
        queuedCount += 1
        ready.append(UInt32(truncatingIfNeeded: slot))
    }

    /// Removes the token at `slot`; the token moved into it keeps its place
    /// in the ready queue under its new slot.
    @discardableResult
    private mutating func remove(slot: Int) -> TokenState {
        let removal = tokens.remove(slot: slot)
        if let moved = removal.moved, tokens[slot: moved.to].queued {
            ready.append(UInt32(truncatingIfNeeded: moved.to))
        }
        return removal.value
    }

    /// One fewer token has `version` in flight; the push, while any still has it.
    @discardableResult
    private mutating func release(_ version: UInt64) -> LiveActivityPush? {
        guard let entry = sent[version] else { return nil }
        if entry.count <= 1 { sent.removeValue(forKey: version) } else { sent[version] = (entry.push, entry.count - 1) }
        return entry.push
    }

    private mutating func setDone(_ state: inout TokenState, _ version: UInt64) {
        guard version > state.done else { return }
        decrement(state.done)
        state.done = version
        doneCounts[version, default: 0] += 1
    }

    private mutating func decrement(_ version: UInt64) {
        guard let count = doneCounts[version] else { return }
        if count <= 1 { doneCounts.removeValue(forKey: version) } else { doneCounts[version] = count - 1 }
    }

    /// Starts what waits, up to the in-flight limit and the ``allowance``
    /// (call after raising the allowance).
    public mutating func resume(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        pump(into: &actions)
        reportCompletion(into: &actions)
        return actions
    }

    /// Starts sends from the ready queue up to the in-flight limit and the allowance.
    private mutating func pump(into actions: inout [Action]) {
        guard let latest else { return }
        while inFlightCount < configuration.maxInFlight, allowance > 0, let next = ready.popFirst() {
            let slot = Int(next)
            guard slot < tokens.count, tokens[slot: slot].queued else { continue }
            var state = tokens[slot: slot]
            state.queued = false
            queuedCount -= 1
            guard state.done < latest.version, state.inFlightVersion == 0, !state.retrying else {
                tokens[slot: slot] = state
                continue
            }
            let push = latest
            if state.attemptsVersion != push.version {
                state.attemptsVersion = push.version
                state.attempts = 0
                state.firstFailureAt = nil
            }
            state.inFlightVersion = push.version
            state.attempts += 1
            tokens[slot: slot] = state
            inFlightCount += 1
            if allowance != .max { allowance -= 1 }
            sent[latest.version, default: (latest, 0)].count += 1
            actions.append(.send(tokens.tokens[slot], push))
        }
    }

    /// Reports the version every token has reached when it rises. A token
    /// that joins behind (sent the latest when it registers, or again)
    /// lowers it without a report: the latest is complete again only once
    /// that token has it too.
    private mutating func reportCompletion(into actions: inout [Action]) {
        let through = doneCounts.keys.min() ?? (latest?.version ?? reportedThrough)
        if through > reportedThrough {
            reportedThrough = through
            actions.append(.completed(through: through))
        } else if through < reportedThrough {
            reportedThrough = through
        }
    }
}
