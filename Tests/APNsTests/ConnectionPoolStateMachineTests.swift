import LiveDispatchCore
import Testing
@testable import APNs

/// The pool's decisions, driven input by input with injected time and a
/// fake signer: no event loop, no clock, no sleep.
@Suite("Connection pool state machine")
struct ConnectionPoolStateMachineTests {
    typealias Machine = APNsConnectionPool.StateMachine

    /// Seconds since 1970 at which every test starts.
    static let t0: Double = 1_000_000
    static let timeout: Double = 30

    /// Signs `jwt-<issuedAt seconds>` so tests can tell tokens apart.
    static let signer: Machine.Signer = { issuedAt throws(APNsError) in "jwt-\(Int(issuedAt.seconds))" }
    static let jwt0 = "jwt-1000000"

    func machine(
        connections: Int = 1, maxQueued: Int = 4, maxResends: Int = 2, idlePingInterval: Double = 600,
        signer: @escaping Machine.Signer = Self.signer
    ) -> Machine {
        Machine(
            configuration: .init(
                connections: connections, maxQueued: maxQueued, maxResends: maxResends,
                idlePingInterval: idlePingInterval, requestTimeout: Self.timeout),
            sign: signer)
    }

    /// Starts the pool and makes every connection ready with `maxStreams`.
    func ready(_ machine: inout Machine, maxStreams: Int = 100) {
        for case .createConnection(let id) in machine.start() {
            #expect(machine.connectionEstablished(id, now: Self.t0) == [])
            #expect(machine.settingsReceived(id, maxConcurrentStreams: maxStreams, now: Self.t0) == [])
        }
    }

    /// Makes connection `id` authenticated through one delivered request.
    func authenticate(_ machine: inout Machine, _ id: Int, request: Int = 1000) {
        #expect(machine.requestArrived(request, now: Self.t0) == [.execute(request, on: id, token: Self.jwt0)])
        _ = machine.responseReceived(request, on: id, outcome: .delivered(apnsID: "a"), now: Self.t0)
    }

    static func retryable(_ error: APNsError) -> APNsOutcome {
        .retryable(.init(status: nil, reason: nil, error: error, retryAfter: nil))
    }

    static let timedOut = retryable(.timeout(seconds: timeout))
    static let expired = APNsOutcome.permanent(status: 403, reason: .expiredProviderToken)

    // MARK: Connections and streams

    @Test func startOpensTheConfiguredConnections() {
        var machine = machine(connections: 3)
        #expect(machine.start() == [.createConnection(0), .createConnection(1), .createConnection(2)])
        #expect(machine.connectionCounts[.connecting] == 3)
    }

    @Test func oneStreamUntilARequestSucceedsThenTheServerLimit() {
        var machine = machine(maxQueued: 10)
        ready(&machine, maxStreams: 3)
        #expect(machine.streamLimit(of: 0) == 1)
        #expect(machine.requestArrived(1, now: Self.t0) == [.execute(1, on: 0, token: Self.jwt0)])
        #expect(machine.requestsArrived(2...5, now: Self.t0) == [])
        #expect(machine.queuedCount == 4)
        // A failed answer does not lift the limit.
        let failure = APNsOutcome.permanent(status: 400, reason: .badTopic)
        #expect(
            machine.responseReceived(1, on: 0, outcome: failure, now: Self.t0 + 1)
                == [.complete(1, failure), .execute(2, on: 0, token: Self.jwt0)])
        #expect(machine.streamLimit(of: 0) == 1)
        // A success does, up to the server's limit, never beyond.
        #expect(
            machine.responseReceived(2, on: 0, outcome: .delivered(apnsID: "2"), now: Self.t0 + 2) == [
                .complete(2, .delivered(apnsID: "2")), .execute(3, on: 0, token: Self.jwt0),
                .execute(4, on: 0, token: Self.jwt0), .execute(5, on: 0, token: Self.jwt0),
            ])
        #expect(machine.streamCount(of: 0) == 3)
        #expect(machine.requestArrived(6, now: Self.t0 + 3) == [])
        #expect(machine.phase(of: 6) == .queued)
    }

    @Test func aLowerServerLimitAppliesToNewStreamsOnly() {
        var machine = machine(maxQueued: 10)
        ready(&machine, maxStreams: 4)
        authenticate(&machine, 0)
        #expect(machine.requestsArrived(2...5, now: Self.t0).count == 4)
        #expect(machine.settingsReceived(0, maxConcurrentStreams: 1, now: Self.t0) == [])
        #expect(machine.requestArrived(6, now: Self.t0) == [])
        for request in 2...4 {
            #expect(
                machine.responseReceived(request, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
                    == [.complete(request, .delivered(apnsID: ""))])
        }
        #expect(
            machine.responseReceived(5, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
                == [.complete(5, .delivered(apnsID: "")), .execute(6, on: 0, token: Self.jwt0)])
        // A higher limit starts queued requests at once.
        _ = machine.requestsArrived(7...9, now: Self.t0)
        #expect(
            machine.settingsReceived(0, maxConcurrentStreams: 3, now: Self.t0)
                == [.execute(7, on: 0, token: Self.jwt0), .execute(8, on: 0, token: Self.jwt0)])
    }

    @Test func streamsSpreadOverConnections() {
        var machine = machine(connections: 3)
        ready(&machine)
        #expect(
            machine.requestsArrived(0..<3, now: Self.t0) == [
                .execute(0, on: 0, token: Self.jwt0), .execute(1, on: 1, token: Self.jwt0),
                .execute(2, on: 2, token: Self.jwt0),
            ])
    }

    @Test func aLostConnectionReconnectsWithGrowingCappedBackoff() {
        var machine = machine()
        ready(&machine)
        #expect(machine.connectionClosed(0, jitter: 1, now: Self.t0) == [.scheduleReconnect(0, delay: 0.1)])
        #expect(machine.reconnectDue(0) == [.createConnection(0)])
        var delays: [Double] = []
        for _ in 0..<14 {
            for case .scheduleReconnect(_, let delay) in machine.connectionFailed(0, error: "refused", jitter: 1) {
                delays.append(delay)
            }
            _ = machine.reconnectDue(0)
        }
        #expect(delays.prefix(4) == [0.1, 0.2, 0.4, 0.8])
        #expect(delays.allSatisfy { $0 <= 60 })
        #expect(delays.last == 60)
        // Jitter scales the delay into [½, 1] of the ceiling.
        #expect(machine.backoff(failures: 20, jitter: 0) == 30)
        // Success resets the count.
        _ = machine.connectionEstablished(0, now: Self.t0)
        #expect(machine.connectionClosed(0, jitter: 1, now: Self.t0) == [.scheduleReconnect(0, delay: 0.1)])
    }

    @Test func idleConnectionsArePinged() {
        var machine = machine(connections: 2, idlePingInterval: 10)
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        #expect(machine.tick(now: Self.t0 + 9) == [])
        // Connection 0 carries a stream: only connection 1 is idle.
        #expect(machine.tick(now: Self.t0 + 11) == [.ping(1)])
        #expect(machine.tick(now: Self.t0 + 12) == [])
        #expect(machine.tick(now: Self.t0 + 21) == [.ping(1)])
    }

    // MARK: Back-pressure

    @Test func aFullQueueMakesCallersWaitAndLetsThemInInOrder() {
        var machine = machine(maxQueued: 2)
        ready(&machine)
        #expect(machine.requestArrived(1, now: Self.t0) == [.execute(1, on: 0, token: Self.jwt0)])
        #expect(machine.requestsArrived(2...5, now: Self.t0) == [])
        #expect(machine.phase(of: 2) == .queued)
        #expect(machine.phase(of: 3) == .queued)
        #expect(machine.phase(of: 4) == .waiting)
        #expect(machine.phase(of: 5) == .waiting)
        #expect(machine.queuedCount == 2)
        #expect(machine.waitingCount == 2)
        // One stream ends: request 2 starts and the first waiter takes its room.
        let outcome = Self.retryable(.shutdown)
        #expect(
            machine.responseReceived(1, on: 0, outcome: outcome, now: Self.t0)
                == [.complete(1, outcome), .execute(2, on: 0, token: Self.jwt0)])
        #expect(machine.phase(of: 4) == .queued)
        #expect(machine.phase(of: 5) == .waiting)
        // A newcomer cannot jump the line while someone waits.
        #expect(machine.requestArrived(6, now: Self.t0) == [])
        #expect(machine.phase(of: 6) == .waiting)
        #expect(machine.waitingCount == 2)
    }

    @Test func aCancelledCallerLeavesItsLineOrItsStream() {
        var machine = machine(maxQueued: 1)
        ready(&machine)
        _ = machine.requestsArrived(1...3, now: Self.t0)
        #expect(machine.requestCancelled(3, now: Self.t0) == [.fail(3, Self.retryable(.cancelled))])
        #expect(machine.waitingCount == 0)
        _ = machine.requestArrived(4, now: Self.t0)
        #expect(machine.requestCancelled(2, now: Self.t0) == [.fail(2, Self.retryable(.cancelled))])
        #expect(machine.phase(of: 4) == .queued)
        #expect(
            machine.requestCancelled(1, now: Self.t0)
                == [.cancelStream(1, on: 0), .fail(1, Self.retryable(.cancelled)), .execute(4, on: 0, token: Self.jwt0)])
        // Cancelling twice, or after the end, does nothing.
        #expect(machine.requestCancelled(1, now: Self.t0) == [])
    }

    // MARK: Deadlines

    @Test func queuedAndWaitingRequestsFailAtTheirDeadline() {
        var machine = machine(maxQueued: 1)
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        _ = machine.requestArrived(2, now: Self.t0 + 1)  // queued
        _ = machine.requestArrived(3, now: Self.t0 + 2)  // waiting
        #expect(machine.tick(now: Self.t0 + Self.timeout + 0.5) == [.cancelStream(1, on: 0), .fail(1, Self.timedOut), .execute(2, on: 0, token: Self.jwt0)])
        #expect(machine.phase(of: 3) == .queued)
        // The deadline counts from arrival, not from when the stream opened.
        #expect(machine.tick(now: Self.t0 + 1 + Self.timeout) == [.cancelStream(2, on: 0), .fail(2, Self.timedOut), .execute(3, on: 0, token: Self.jwt0)])
        #expect(machine.tick(now: Self.t0 + 2 + Self.timeout - 0.01) == [])
        #expect(machine.tick(now: Self.t0 + 2 + Self.timeout) == [.cancelStream(3, on: 0), .fail(3, Self.timedOut)])
        #expect(machine.requestCount == 0)
        #expect(machine.inFlightCount == 0)
    }

    @Test func aWaitingRequestFailsAtItsDeadlineAndKeepsItsPlaceUntilThen() {
        var machine = machine(maxQueued: 1)
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        _ = machine.requestArrived(2, now: Self.t0)
        _ = machine.requestArrived(3, now: Self.t0 - 5)  // the clock stepped back
        _ = machine.requestArrived(4, now: Self.t0)
        #expect(machine.tick(now: Self.t0 - 5 + Self.timeout) == [.fail(3, Self.timedOut)])
        #expect(machine.phase(of: 4) == .waiting)
        #expect(machine.waitingCount == 1)
    }

    @Test func aResponseAfterTheDeadlineIsIgnored() {
        var machine = machine()
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        _ = machine.tick(now: Self.t0 + Self.timeout)
        #expect(machine.responseReceived(1, on: 0, outcome: .delivered(apnsID: "1"), now: Self.t0 + 31) == [])
        #expect(machine.streamCount(of: 0) == 0)
        #expect(machine.streamEnded(1, on: 0, .refused, now: Self.t0 + 31) == [])
    }

    @Test func aTimeoutNamesTheConnectionErrorWhileNoConnectionIsReady() {
        var machine = machine()
        _ = machine.start()
        _ = machine.connectionFailed(0, error: "connection refused", jitter: 0)
        _ = machine.requestArrived(1, now: Self.t0)
        let expected = Self.retryable(.timeout(seconds: Self.timeout, connectionError: "connection refused"))
        #expect(machine.tick(now: Self.t0 + Self.timeout) == [.fail(1, expected)])
    }

    @Test func theNextDeadlineIsTheEarliestRequestDeadlineOrIdlePing() throws {
        var machine = machine(idlePingInterval: 600)
        #expect(machine.nextDeadline == nil)
        ready(&machine)
        // An idle ready connection is due a ping 600 s after its last activity.
        #expect(machine.nextDeadline == Self.t0 + 600)
        // A stream in flight: no ping; the request's deadline.
        _ = machine.requestArrived(1, now: Self.t0 + 5)
        #expect(machine.nextDeadline == Self.t0 + 5 + Self.timeout)
        // A request queued behind it (one stream until a success) keeps the earlier deadline.
        _ = machine.requestArrived(2, now: Self.t0 + 10)
        #expect(machine.nextDeadline == Self.t0 + 5 + Self.timeout)
        _ = machine.responseReceived(1, on: 0, outcome: .delivered(apnsID: "1"), now: Self.t0 + 11)
        #expect(machine.nextDeadline == Self.t0 + 10 + Self.timeout)
        _ = machine.responseReceived(2, on: 0, outcome: .delivered(apnsID: "2"), now: Self.t0 + 12)
        // Idle again: the ping is next, and a tick at it pings.
        let next = machine.nextDeadline
        let ping = try #require(next)
        #expect(ping > Self.t0 + 600 && ping <= Self.t0 + 612)
        #expect(machine.tick(now: ping - 0.001) == [])
        #expect(machine.tick(now: ping) == [.ping(0)])
        #expect(machine.nextDeadline == ping + 600)
    }

    @Test func aRequestPastItsDeadlineFailsAtTheTickOfThatDeadline() throws {
        var machine = machine()
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        let next = machine.nextDeadline
        let deadline = try #require(next)
        #expect(deadline == Self.t0 + Self.timeout)
        #expect(machine.tick(now: deadline - 0.001) == [])
        #expect(machine.tick(now: deadline) == [.cancelStream(1, on: 0), .fail(1, Self.timedOut)])
    }

    @Test func endedRequestsDoNotPileUpInTheDeadlineHeap() {
        var machine = machine(maxQueued: 1000)
        ready(&machine, maxStreams: 1000)
        authenticate(&machine, 0)
        // One request never answered; thousands around it are.
        _ = machine.requestArrived(0, now: Self.t0)
        for request in 1..<5000 {
            _ = machine.requestArrived(request, now: Self.t0 + Double(request) / 1000)
            _ = machine.responseReceived(request, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
            #expect(machine.deadlineEntries <= 2 * machine.requestCount + 64)
        }
        #expect(machine.tick(now: Self.t0 + Self.timeout) == [.cancelStream(0, on: 0), .fail(0, Self.timedOut)])
    }

    // MARK: Provider token

    @Test func anExpiredProviderTokenIsRenewedAndTheRequestRetriedExactlyOnce() {
        var machine = machine()
        ready(&machine)
        #expect(machine.requestArrived(1, now: Self.t0) == [.execute(1, on: 0, token: Self.jwt0)])
        let later = Self.t0 + 20 * 60
        #expect(machine.responseReceived(1, on: 0, outcome: Self.expired, now: later) == [.execute(1, on: 0, token: "jwt-\(Int(later))")])
        #expect(machine.tokens.renewals == 2)
        // The retried request is answered ExpiredProviderToken again: no second retry.
        let rejected = APNsOutcome.misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
        #expect(machine.responseReceived(1, on: 0, outcome: Self.expired, now: later + 40 * 60) == [.complete(1, rejected)])
        #expect(machine.tokens.renewals == 2)
        #expect(machine.requestCount == 0)
    }

    @Test func streamsCarryingTheOldTokenRetryWithTheNewOneWithoutSigningAgain() {
        var machine = machine(maxQueued: 10)
        ready(&machine)
        authenticate(&machine, 0)
        _ = machine.requestsArrived(1...2, now: Self.t0)
        let later = Self.t0 + 25 * 60
        let renewed = "jwt-\(Int(later))"
        #expect(machine.responseReceived(1, on: 0, outcome: Self.expired, now: later) == [.execute(1, on: 0, token: renewed)])
        #expect(machine.responseReceived(2, on: 0, outcome: Self.expired, now: later) == [.execute(2, on: 0, token: renewed)])
        #expect(machine.tokens.renewals == 2)
    }

    @Test func aTokenTooYoungToHaveExpiredIsAConfigurationError() {
        var machine = machine()
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        let rejected = APNsOutcome.misconfigured(.providerTokenRejected(reason: .expiredProviderToken))
        #expect(machine.responseReceived(1, on: 0, outcome: Self.expired, now: Self.t0 + 60) == [.complete(1, rejected)])
        #expect(machine.tokens.renewals == 1)
    }

    @Test func aTokenThatCannotBeSignedFailsTheRequestAsMisconfigured() {
        let broken = APNsError.signingFailed("no key")
        var machine = machine(signer: { _ throws(APNsError) in throw broken })
        ready(&machine)
        #expect(machine.requestArrived(1, now: Self.t0) == [.fail(1, .misconfigured(broken))])
        #expect(machine.inFlightCount == 0)
        #expect(machine.streamCount(of: 0) == 0)
    }

    @Test func theTokenIsRenewedAtFiftyMinutes() {
        var machine = machine(maxQueued: 10)
        ready(&machine)
        authenticate(&machine, 0)
        let later = Self.t0 + 50 * 60
        #expect(machine.requestArrived(1, now: later) == [.execute(1, on: 0, token: "jwt-\(Int(later))")])
    }

    // MARK: Connection loss and GOAWAY

    @Test func aDyingConnectionRequeuesWhatTheServerDidNotProcessAndFailsTheRest() {
        var machine = machine(connections: 2, maxQueued: 1)
        ready(&machine, maxStreams: 10)
        authenticate(&machine, 0)
        _ = machine.requestsArrived(1001...1002, now: Self.t0)
        #expect(machine.phase(of: 1002) == .inFlight(1))
        _ = machine.responseReceived(1002, on: 1, outcome: .delivered(apnsID: ""), now: Self.t0)
        _ = machine.responseReceived(1001, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
        // Odd requests on connection 0, even ones on connection 1, both full;
        // then 9 is queued and 10 waits.
        _ = machine.requestsArrived(1...8, now: Self.t0)
        #expect(machine.streamCount(of: 0) == 4)
        _ = machine.settingsReceived(0, maxConcurrentStreams: 4, now: Self.t0)
        _ = machine.settingsReceived(1, maxConcurrentStreams: 4, now: Self.t0)
        _ = machine.requestsArrived(9...10, now: Self.t0)
        #expect(machine.phase(of: 9) == .queued)
        #expect(machine.phase(of: 10) == .waiting)

        // Connection 0 dies: 1 was written, 3 refused, 5 above the GOAWAY's
        // last-stream-id; 7 was never written, so the connection does not know it.
        let lost = Self.retryable(.connectionClosed("connection lost with the stream open"))
        #expect(
            machine.connectionClosed(
                0, streams: [(1, .connectionLost), (3, .refused), (5, .aboveGoawayLastStream)], jitter: 1, now: Self.t0)
                == [.fail(1, lost), .scheduleReconnect(0, delay: 0.1)])
        #expect(machine.state(of: 0) == .backingOff)
        #expect(machine.inFlightCount == 4)
        #expect(machine.phase(of: 10) == .waiting)
        // Connection 1 frees a stream: the unprocessed ones go first, oldest first.
        #expect(
            machine.responseReceived(2, on: 1, outcome: .delivered(apnsID: ""), now: Self.t0)
                == [.complete(2, .delivered(apnsID: "")), .execute(3, on: 1, token: Self.jwt0)])
        #expect(machine.reconnectDue(0) == [.createConnection(0)])
        #expect(machine.connectionEstablished(0, now: Self.t0) == [.execute(5, on: 0, token: Self.jwt0)])
        #expect(machine.phase(of: 7) == .queued)
        #expect(machine.phase(of: 9) == .queued)
        #expect(machine.phase(of: 10) == .waiting)
        // A late report from the old channel about a request now queued is ignored.
        #expect(machine.streamEnded(7, on: 0, .notSent, now: Self.t0) == [])
        #expect(machine.phase(of: 7) == .queued)
    }

    @Test func refusedStreamsAreResentAFewTimesThenFail() {
        var machine = machine(maxQueued: 4, maxResends: 2)
        ready(&machine)
        _ = machine.requestsArrived(1...2, now: Self.t0)
        #expect(machine.streamEnded(1, on: 0, .refused, now: Self.t0) == [.execute(1, on: 0, token: Self.jwt0)])
        #expect(machine.streamEnded(1, on: 0, .aboveGoawayLastStream, now: Self.t0) == [.execute(1, on: 0, token: Self.jwt0)])
        #expect(
            machine.streamEnded(1, on: 0, .refused, now: Self.t0)
                == [.fail(1, Self.retryable(.streamReset(errorCode: 7))), .execute(2, on: 0, token: Self.jwt0)])
        // Not sent at all does not count: the connection never had it.
        for _ in 0..<5 { #expect(machine.streamEnded(2, on: 0, .notSent, now: Self.t0) == [.execute(2, on: 0, token: Self.jwt0)]) }
        #expect(
            machine.streamEnded(2, on: 0, .reset(errorCode: 2), now: Self.t0)
                == [.fail(2, Self.retryable(.streamReset(errorCode: 2)))])
    }

    @Test func aStaleReportAboutAnotherConnectionIsIgnored() {
        var machine = machine(connections: 2)
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        #expect(machine.phase(of: 1) == .inFlight(0))
        #expect(machine.streamEnded(1, on: 1, .notSent, now: Self.t0) == [])
        #expect(machine.responseReceived(1, on: 1, outcome: .delivered(apnsID: ""), now: Self.t0) == [])
        #expect(machine.phase(of: 1) == .inFlight(0))
    }

    @Test func goawayDrainsOpensAReplacementAndClosesWhenEmpty() {
        var machine = machine(maxQueued: 10)
        ready(&machine)
        authenticate(&machine, 0)
        #expect(machine.requestsArrived(2...4, now: Self.t0).count == 3)
        #expect(machine.goawayReceived(0) == [.createConnection(1)])
        #expect(machine.goawayReceived(0) == [])
        #expect(machine.state(of: 0) == .draining)
        // Streams above last-stream-id come back and wait for the replacement.
        #expect(machine.streamEnded(4, on: 0, .aboveGoawayLastStream, now: Self.t0) == [])
        #expect(machine.requestArrived(5, now: Self.t0) == [])
        #expect(machine.responseReceived(2, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0) == [.complete(2, .delivered(apnsID: ""))])
        #expect(
            machine.responseReceived(3, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
                == [.complete(3, .delivered(apnsID: "")), .closeConnection(0)])
        #expect(machine.connectionEstablished(1, now: Self.t0) == [.execute(4, on: 1, token: Self.jwt0)])
        #expect(machine.connectionClosed(0, jitter: 0.5, now: Self.t0) == [])
        #expect(machine.state(of: 0) == nil)
        #expect(machine.phase(of: 5) == .queued)
    }

    @Test func aResponseAskingForAnotherConnectionDrainsThisOne() {
        var machine = machine(maxQueued: 10)
        ready(&machine)
        authenticate(&machine, 0)
        _ = machine.requestsArrived(2...3, now: Self.t0)
        let shutdown = APNsOutcome.retryable(
            .init(status: 503, reason: .shutdown, error: .serverRefused(status: 503, reason: .shutdown), retryAfter: nil))
        #expect(machine.responseReceived(2, on: 0, outcome: shutdown, now: Self.t0) == [.complete(2, shutdown), .createConnection(1)])
        #expect(machine.state(of: 0) == .draining)
        #expect(machine.requestArrived(4, now: Self.t0) == [])
        #expect(
            machine.responseReceived(3, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0)
                == [.complete(3, .delivered(apnsID: "")), .closeConnection(0)])
    }

    // MARK: Shutdown

    @Test func shutdownFailsQueuedAndWaitingRequestsAndClosesConnectionsWhenDrained() {
        var machine = machine(connections: 2, maxQueued: 1)
        ready(&machine)
        _ = machine.requestsArrived(1...5, now: Self.t0)
        #expect(machine.phase(of: 1) == .inFlight(0))
        #expect(machine.phase(of: 2) == .inFlight(1))
        #expect(
            machine.shutdown() == [
                .fail(3, Self.retryable(.shutdown)), .fail(4, Self.retryable(.shutdown)),
                .fail(5, Self.retryable(.shutdown)),
            ])
        #expect(machine.shutdown() == [])
        #expect(machine.requestArrived(6, now: Self.t0) == [.fail(6, Self.retryable(.shutdown))])
        // An unprocessed stream is not sent again once the pool stops.
        #expect(machine.streamEnded(2, on: 1, .refused, now: Self.t0) == [.fail(2, Self.retryable(.shutdown)), .closeConnection(1)])
        #expect(machine.responseReceived(1, on: 0, outcome: .delivered(apnsID: ""), now: Self.t0) == [.complete(1, .delivered(apnsID: "")), .closeConnection(0)])
        #expect(!machine.isFinished)
        #expect(machine.connectionClosed(0, jitter: 0, now: Self.t0) == [])
        #expect(machine.connectionClosed(1, jitter: 0, now: Self.t0) == [])
        #expect(machine.isFinished)
        #expect(machine.requestCount == 0)
    }

    @Test func shutdownWhileConnectingClosesTheConnectionWhenItArrives() {
        var machine = machine()
        _ = machine.start()
        _ = machine.requestArrived(1, now: Self.t0)
        #expect(machine.shutdown() == [.fail(1, Self.retryable(.shutdown)), .closeConnection(0)])
        #expect(machine.connectionEstablished(0, now: Self.t0) == [.closeConnection(0)])
        #expect(machine.connectionClosed(0, jitter: 0, now: Self.t0) == [])
        #expect(machine.isFinished)
    }

    @Test func shutdownLetsStreamsInFlightEndAtTheirDeadline() {
        var machine = machine()
        ready(&machine)
        _ = machine.requestArrived(1, now: Self.t0)
        #expect(machine.shutdown() == [])
        #expect(
            machine.tick(now: Self.t0 + Self.timeout)
                == [.cancelStream(1, on: 0), .fail(1, Self.timedOut), .closeConnection(0)])
    }
}
