import Testing
@testable import APNs

@Suite("Connection pool state machine")
struct ConnectionPoolStateMachineTests {
    typealias Machine = APNsConnectionPool.StateMachine

    func machine(connections: Int = 1, maxQueued: Int = 4, maxResends: Int = 2) -> Machine {
        Machine(configuration: .init(connections: connections, maxQueued: maxQueued, maxResends: maxResends))
    }

    /// Starts the pool and makes every connection ready.
    func ready(_ machine: inout Machine, maxStreams: Int = 100) -> [Machine.Action] {
        var actions: [Machine.Action] = []
        for case .createConnection(let id) in machine.start() {
            actions += machine.connectionEstablished(id, now: 0)
            actions += machine.settingsReceived(id, maxConcurrentStreams: maxStreams, now: 0)
        }
        return actions
    }

    @Test func startOpensTheConfiguredConnections() {
        var machine = machine(connections: 3)
        #expect(machine.start() == [.createConnection(0), .createConnection(1), .createConnection(2)])
        #expect(machine.connectionCounts[.connecting] == 3)
    }

    @Test func oneStreamUntilARequestSucceedsThenTheServerLimit() {
        var machine = machine(maxQueued: 10)
        _ = ready(&machine, maxStreams: 3)
        #expect(machine.streamLimit(of: 0) == 1)
        #expect(machine.requestArrived(1, now: 0) == .execute(on: 0))
        #expect(machine.requestArrived(2, now: 0) == .queued)
        #expect(machine.requestArrived(3, now: 0) == .queued)
        #expect(machine.requestArrived(4, now: 0) == .queued)
        #expect(machine.requestArrived(5, now: 0) == .queued)
        // A failed answer does not lift the limit.
        #expect(machine.responseReceived(1, on: 0, succeeded: false, now: 1) == [.execute(2, on: 0)])
        #expect(machine.streamLimit(of: 0) == 1)
        // A success does, up to the server's limit, never beyond.
        #expect(machine.responseReceived(2, on: 0, succeeded: true, now: 2) == [.execute(3, on: 0), .execute(4, on: 0), .execute(5, on: 0)])
        #expect(machine.streamCount(of: 0) == 3)
        #expect(machine.requestArrived(6, now: 3) == .queued)
    }

    @Test func aLowerServerLimitApplies() {
        var machine = machine(maxQueued: 10)
        _ = ready(&machine, maxStreams: 4)
        #expect(machine.requestArrived(1, now: 0) == .execute(on: 0))
        _ = machine.responseReceived(1, on: 0, succeeded: true, now: 0)
        for request in 2...5 { #expect(machine.requestArrived(request, now: 0) == .execute(on: 0)) }
        _ = machine.settingsReceived(0, maxConcurrentStreams: 1, now: 0)
        #expect(machine.requestArrived(6, now: 0) == .queued)
        #expect(machine.responseReceived(2, on: 0, succeeded: true, now: 0) == [])
        #expect(machine.responseReceived(3, on: 0, succeeded: true, now: 0) == [])
        #expect(machine.responseReceived(4, on: 0, succeeded: true, now: 0) == [])
        #expect(machine.responseReceived(5, on: 0, succeeded: true, now: 0) == [.execute(6, on: 0)])
    }

    @Test func streamsSpreadOverConnections() {
        var machine = machine(connections: 3)
        _ = ready(&machine)
        var used: [Int] = []
        for request in 0..<3 {
            if case .execute(let connection) = machine.requestArrived(request, now: 0) { used.append(connection) }
        }
        #expect(used.sorted() == [0, 1, 2])
    }

    @Test func aFullQueueMakesCallersWaitAndAdmitsThemInOrder() {
        var machine = machine(maxQueued: 2)
        _ = ready(&machine)
        #expect(machine.requestArrived(1, now: 0) == .execute(on: 0))
        #expect(machine.requestArrived(2, now: 0) == .queued)
        #expect(machine.requestArrived(3, now: 0) == .queued)
        #expect(machine.requestArrived(4, now: 0) == .wait)
        #expect(machine.requestArrived(5, now: 0) == .wait)
        #expect(machine.queuedCount == 2)
        #expect(machine.waitingCount == 2)
        // One stream ends: request 2 starts, the first waiter is admitted into its room.
        #expect(machine.responseReceived(1, on: 0, succeeded: false, now: 1) == [.execute(2, on: 0), .admit(4)])
        #expect(machine.requestArrived(4, now: 1) == .queued)
        #expect(machine.queuedCount == 2)
        #expect(machine.waitingCount == 1)
        // A newcomer cannot jump the line while someone waits.
        #expect(machine.requestArrived(6, now: 1) == .wait)
    }

    @Test func unprocessedRequestsGoFirstAndAreBounded() {
        var machine = machine(maxQueued: 4, maxResends: 2)
        _ = ready(&machine)
        #expect(machine.requestArrived(1, now: 0) == .execute(on: 0))
        #expect(machine.requestArrived(2, now: 0) == .queued)
        // Refused: re-sent before request 2.
        #expect(machine.requestUnprocessed(1, on: 0, now: 0) == [.execute(1, on: 0)])
        #expect(machine.requestUnprocessed(1, on: 0, now: 0) == [.execute(1, on: 0)])
        let third = machine.requestUnprocessed(1, on: 0, now: 0)
        #expect(third.first == .fail(1, .streamReset(errorCode: 7)))
        #expect(third.dropFirst().first == .execute(2, on: 0))
    }

    @Test func goawayDrainsOpensAReplacementAndClosesWhenEmpty() {
        var machine = machine(maxQueued: 10)
        _ = ready(&machine)
        _ = machine.requestArrived(1, now: 0)
        _ = machine.responseReceived(1, on: 0, succeeded: true, now: 0)
        for request in 2...4 { #expect(machine.requestArrived(request, now: 0) == .execute(on: 0)) }
        #expect(machine.goawayReceived(0) == [.createConnection(1)])
        #expect(machine.state(of: 0) == .draining)
        // Streams above last-stream-id come back and wait for the replacement.
        #expect(machine.requestUnprocessed(4, on: 0, now: 0) == [])
        #expect(machine.requestArrived(5, now: 0) == .queued)
        #expect(machine.responseReceived(2, on: 0, succeeded: true, now: 0) == [])
        #expect(machine.responseReceived(3, on: 0, succeeded: true, now: 0) == [.closeConnection(0)])
        #expect(machine.connectionEstablished(1, now: 0) == [.execute(4, on: 1)])
        #expect(machine.connectionClosed(0, jitter: 0.5) == [])
        #expect(machine.state(of: 0) == nil)
    }

    @Test func aLostConnectionReconnectsWithGrowingCappedBackoff() {
        var machine = machine()
        _ = ready(&machine)
        #expect(machine.connectionClosed(0, jitter: 1) == [.scheduleReconnect(0, delay: 0.1)])
        #expect(machine.reconnectDue(0) == [.createConnection(0)])
        var delays: [Double] = []
        for _ in 0..<14 {
            for case .scheduleReconnect(_, let delay) in machine.connectionFailed(0, jitter: 1) { delays.append(delay) }
            _ = machine.reconnectDue(0)
        }
        #expect(delays.prefix(4) == [0.1, 0.2, 0.4, 0.8])
        #expect(delays.allSatisfy { $0 <= 60 })
        #expect(delays.last == 60)
        // Jitter scales the delay into [½, 1] of the ceiling.
        #expect(machine.backoff(failures: 20, jitter: 0) == 30)
        // Success resets the count.
        _ = machine.connectionEstablished(0, now: 0)
        #expect(machine.connectionClosed(0, jitter: 1) == [.scheduleReconnect(0, delay: 0.1)])
    }

    @Test func deadlinesFailQueuedWaitingAndInFlightRequests() {
        var machine = machine(maxQueued: 1)
        _ = ready(&machine)
        _ = machine.requestArrived(1, now: 0)
        _ = machine.requestArrived(2, now: 0)
        #expect(machine.requestArrived(3, now: 0) == .wait)
        #expect(machine.requestTimedOut(3, seconds: 5, now: 5) == [.fail(3, .timeout(seconds: 5))])
        #expect(machine.requestArrived(4, now: 0) == .wait)
        #expect(machine.requestTimedOut(2, seconds: 5, now: 5) == [.fail(2, .timeout(seconds: 5)), .admit(4)])
        #expect(machine.requestTimedOut(1, seconds: 5, now: 5) == [.cancelStream(1, on: 0), .fail(1, .timeout(seconds: 5))])
        #expect(machine.inFlightCount == 0)
        #expect(machine.requestTimedOut(1, seconds: 5, now: 6) == [])
    }

    @Test func idleConnectionsArePinged() {
        var machine = Machine(configuration: .init(connections: 2, maxQueued: 4, idlePingInterval: 60))
        _ = ready(&machine)
        _ = machine.requestArrived(1, now: 0)
        #expect(machine.tick(now: 30) == [])
        // Connection 0 carries a stream: only connection 1 is idle.
        #expect(machine.tick(now: 61) == [.ping(1)])
        #expect(machine.tick(now: 62) == [])
        #expect(machine.tick(now: 122) == [.ping(1)])
    }

    @Test func shutdownFailsWaitersAndClosesConnectionsWhenDrained() {
        var machine = machine(maxQueued: 1)
        _ = ready(&machine)
        _ = machine.requestArrived(1, now: 0)
        _ = machine.requestArrived(2, now: 0)
        _ = machine.requestArrived(3, now: 0)
        #expect(machine.shutdown() == [.fail(2, .shutdown), .fail(3, .shutdown)])
        #expect(machine.requestArrived(4, now: 0) == .fail(.shutdown))
        #expect(machine.responseReceived(1, on: 0, succeeded: true, now: 0) == [.closeConnection(0)])
        #expect(!machine.isFinished)
        #expect(machine.connectionClosed(0, jitter: 0) == [])
        #expect(machine.isFinished)
    }

    @Test func aResponseAskingForAnotherConnectionDrainsThisOne() {
        var machine = machine(maxQueued: 10)
        _ = ready(&machine)
        _ = machine.requestArrived(1, now: 0)
        _ = machine.responseReceived(1, on: 0, succeeded: true, now: 0)
        _ = machine.requestArrived(2, now: 0)
        _ = machine.requestArrived(3, now: 0)
        #expect(machine.responseReceived(2, on: 0, succeeded: false, replaceConnection: true, now: 0) == [.createConnection(1)])
        #expect(machine.state(of: 0) == .draining)
        #expect(machine.requestArrived(4, now: 0) == .queued)
        #expect(machine.responseReceived(3, on: 0, succeeded: true, now: 0) == [.closeConnection(0)])
    }
}
