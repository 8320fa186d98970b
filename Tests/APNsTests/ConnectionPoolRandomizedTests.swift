import LiveDispatchCore
import Testing
@testable import APNs

/// The real pool machine under thousands of random input sequences: every
/// request ends exactly once, streams never exceed a connection's limit,
/// counts agree with the requests, and after shutdown everything drains.
@Suite("Connection pool state machine, randomized")
struct ConnectionPoolRandomizedTests {
    typealias Machine = APNsConnectionPool.StateMachine

    /// What the test knows from the actions alone.
    struct Ledger {
        var ended: [Int: Int] = [:]
        var inFlight: [Int: Int] = [:]  // request → connection
        var open: Set<Int> = []  // connections asked to open and not closed
        mutating func apply(_ actions: [Machine.Action]) {
            for action in actions {
                switch action {
                case .execute(let request, let connection, _):
                    inFlight[request] = connection
                case .complete(let request, _), .fail(let request, _):
                    ended[request, default: 0] += 1
                    inFlight[request] = nil
                case .cancelStream(let request, _):
                    inFlight[request] = nil
                case .createConnection(let id):
                    open.insert(id)
                case .scheduleReconnect, .ping, .closeConnection:
                    break
                }
            }
        }
    }

    @Test(arguments: 0..<100)
    func everyRequestEndsExactlyOnce(seed: Int) {
        var random = SplitMix64(seed: UInt64(seed) &* 7919)
        let timeout = 30.0
        var machine = Machine(
            configuration: .init(
                connections: 1 + random.below(3), maxQueued: 1 + random.below(8), maxResends: random.below(3),
                requestTimeout: timeout),
            sign: { issuedAt throws(APNsError) in "jwt-\(Int(issuedAt.seconds))" })
        var ledger = Ledger()
        var now = 1_000_000.0
        var nextRequest = 0
        ledger.apply(machine.start())
        let outcomes: [APNsOutcome] = [
            .delivered(apnsID: ""), .permanent(status: 403, reason: .expiredProviderToken),
            .permanent(status: 400, reason: .badTopic),
            .retryable(.init(status: 503, reason: .shutdown, error: .serverRefused(status: 503, reason: .shutdown), retryAfter: nil)),
        ]
        let ends: [Machine.StreamEnd] = [.notSent, .refused, .aboveGoawayLastStream, .reset(errorCode: 2), .incomplete, .connectionLost]
        for step in 0..<400 {
            let connections = machine.connectionIDs
            let connection = connections.isEmpty ? 0 : connections[random.below(connections.count)]
            let inFlight = ledger.inFlight.filter { machine.phase(of: $0.key) == .inFlight($0.value) }.keys.sorted()
            let pick = inFlight.isEmpty ? nil : inFlight[random.below(inFlight.count)]
            switch random.below(12) {
            case 0, 1, 2:
                let count = 1 + random.below(4)
                ledger.apply(machine.requestsArrived(nextRequest..<(nextRequest + count), now: now))
                nextRequest += count
            case 3:
                ledger.apply(machine.connectionEstablished(connection, now: now))
                ledger.apply(machine.settingsReceived(connection, maxConcurrentStreams: random.below(6), now: now))
            case 4, 5:
                if let pick, let on = ledger.inFlight[pick] {
                    ledger.apply(machine.responseReceived(pick, on: on, outcome: outcomes[random.below(outcomes.count)], now: now))
                }
            case 6:
                if let pick, let on = ledger.inFlight[pick] {
                    ledger.apply(machine.streamEnded(pick, on: on, ends[random.below(ends.count)], now: now))
                }
            case 7:
                let reported = inFlight.filter { ledger.inFlight[$0] == connection && random.below(2) == 0 }
                    .map { (request: $0, end: ends[random.below(ends.count)]) }
                ledger.apply(machine.connectionClosed(connection, streams: reported, jitter: 0.5, now: now))
            case 8:
                ledger.apply(machine.goawayReceived(connection))
                ledger.apply(machine.reconnectDue(connection))
            case 9:
                if nextRequest > 0 { ledger.apply(machine.requestCancelled(random.below(nextRequest), now: now)) }
            case 10:
                now += Double(random.below(20))
                ledger.apply(machine.tick(now: now))
            default:
                ledger.apply(machine.reconnectDue(connection))
                ledger.apply(machine.connectionFailed(connection, error: "refused", jitter: 0.5))
            }
            // Invariants after every input.
            var streams = 0
            for id in machine.connectionIDs {
                let count = machine.streamCount(of: id) ?? 0
                streams += count
                #expect(count >= 0, "seed \(seed) step \(step): negative stream count")
            }
            #expect(streams == machine.inFlightCount, "seed \(seed) step \(step)")
            #expect(machine.queuedCount >= 0 && machine.waitingCount >= 0, "seed \(seed) step \(step)")
            #expect(
                machine.requestCount == (0..<nextRequest).filter { machine.phase(of: $0) != nil }.count,
                "seed \(seed) step \(step)")
            #expect(ledger.ended.values.allSatisfy { $0 == 1 }, "seed \(seed) step \(step): a request ended twice")
        }
        // Shut down: every request ends once its connection closes or its
        // deadline passes, and the pool finishes.
        ledger.apply(machine.shutdown())
        for id in machine.connectionIDs { ledger.apply(machine.connectionClosed(id, jitter: 0, now: now)) }
        ledger.apply(machine.tick(now: now + timeout))
        #expect(machine.isFinished, "seed \(seed)")
        #expect(machine.requestCount == 0, "seed \(seed)")
        #expect((0..<nextRequest).allSatisfy { ledger.ended[$0] == 1 }, "seed \(seed): a request never ended or ended twice")
    }
}
