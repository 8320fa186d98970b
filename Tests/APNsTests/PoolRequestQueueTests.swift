import LiveDispatchCore
import Testing
@testable import APNs

/// The pool's request sub-machine called directly: where each request
/// waits, the order requests get streams, deadlines and resends, with no
/// connections.
@Suite("Connection pool request queue")
struct PoolRequestQueueTests {
    typealias Queue = APNsConnectionPool.StateMachine.RequestQueue

    static let t0: Double = 1_000_000
    static let timeout: Double = 30

    func queue(maxQueued: Int = 2, maxResends: Int = 1) -> Queue {
        Queue(configuration: .init(connections: 1, maxQueued: maxQueued, maxResends: maxResends, requestTimeout: Self.timeout))
    }

    func drain(_ queue: inout Queue) -> [Int] {
        var order: [Int] = []
        while let next = queue.nextInLine() { order.append(next) }
        return order
    }

    @Test func arrivalsFillTheQueueThenWaitAndComeOutOldestFirst() {
        var queue = queue()
        for id in 1...4 { queue.arrive(id, now: Self.t0, getsStream: false) }
        #expect((1...4).map { queue.phase(of: $0) } == [.queued, .queued, .waiting, .waiting])
        #expect(queue.queuedCount == 2 && queue.waitingCount == 2)
        #expect(!queue.isLineEmpty)
        #expect(drain(&queue) == [1, 2, 3, 4])
        #expect(queue.isLineEmpty)
    }

    @Test func anArrivalWaitsBehindCallersAlreadyWaitingEvenWithRoomInTheQueue() {
        var queue = queue()
        for id in 1...3 { queue.arrive(id, now: Self.t0, getsStream: false) }
        #expect(queue.nextInLine() == 1)
        queue.arrive(4, now: Self.t0, getsStream: false)
        #expect(queue.phase(of: 4) == .waiting)
        queue.admitWaiting()
        #expect(queue.phase(of: 3) == .queued)
        #expect(queue.phase(of: 4) == .waiting, "the queue holds two")
        #expect(drain(&queue) == [2, 3, 4])
    }

    @Test func aRequestThatGetsAStreamIsInNoLine() {
        var queue = queue()
        queue.arrive(1, now: Self.t0, getsStream: true)
        #expect(queue.isLineEmpty)
        queue.streamStarted(1, on: 0, token: "jwt")
        #expect(queue.phase(of: 1) == .inFlight(0))
        #expect(queue.inFlightCount == 1)
        #expect(queue.inFlight(on: 0) == [1])
        #expect(queue.inFlight(on: 1) == [])
        #expect(queue.nextInLine() == nil)
    }

    @Test func aRequestSentAgainGoesFirstUntilItsResendsRunOut() {
        var queue = queue(maxResends: 1)
        queue.arrive(1, now: Self.t0, getsStream: true)
        queue.streamStarted(1, on: 0, token: "jwt")
        queue.arrive(2, now: Self.t0, getsStream: false)
        #expect(queue.leaveStream(1, on: 1) == false, "not in flight on that connection")
        #expect(queue.leaveStream(1, on: 0) == true)
        #expect(queue.leaveStream(1, on: 0) == false, "a stale report")
        #expect(queue.inFlightCount == 0)
        #expect(queue.requeue(1, countsAsResend: true) == true)
        #expect(queue.nextInLine() == 1)
        queue.streamStarted(1, on: 0, token: "jwt")
        #expect(queue.leaveStream(1, on: 0) == true)
        #expect(queue.requeue(1, countsAsResend: false) == true, "a resend that does not count")
        #expect(queue.nextInLine() == 1)
        queue.streamStarted(1, on: 0, token: "jwt")
        #expect(queue.leaveStream(1, on: 0) == true)
        #expect(queue.requeue(1, countsAsResend: true) == false)
        #expect(queue.nextInLine() == 2)
    }

    @Test func aProviderTokenIsRenewedForARequestOnce() {
        var queue = queue()
        queue.arrive(1, now: Self.t0, getsStream: true)
        #expect(queue.tokenToRenew(1) == nil, "no stream yet")
        queue.streamStarted(1, on: 0, token: "jwt-1")
        #expect(queue.tokenToRenew(1) == "jwt-1")
        queue.tokenRenewed(1)
        #expect(queue.tokenToRenew(1) == nil)
    }

    @Test func deadlinesComeDueInOrderAndEndWithTheRequest() {
        var queue = queue()
        queue.arrive(1, now: Self.t0, getsStream: false)
        queue.arrive(2, now: Self.t0 + 1, getsStream: false)
        queue.arrive(3, now: Self.t0 + 2, getsStream: false)
        #expect(queue.nextDeadline == Self.t0 + Self.timeout)
        queue.leaveLine(1)
        queue.remove(1)
        #expect(queue.count == 2)
        #expect(queue.nextDeadline == Self.t0 + 1 + Self.timeout)
        #expect(queue.popDue(now: Self.t0 + 1 + Self.timeout) == [2])
        #expect(queue.nextDeadline == Self.t0 + 2 + Self.timeout)
        #expect(queue.contains(2), "a due request stays until the caller ends it")
    }

    @Test func aRequestThatLeftItsLineIsSkipped() {
        var queue = queue(maxQueued: 1)
        for id in 1...3 { queue.arrive(id, now: Self.t0, getsStream: false) }
        queue.leaveLine(1)
        queue.remove(1)
        queue.leaveLine(2)
        queue.remove(2)
        #expect(queue.queuedCount == 0 && queue.waitingCount == 1)
        #expect(drain(&queue) == [3])
    }

    @Test func removingTheLinedLeavesRequestsInFlight() {
        var queue = queue()
        queue.arrive(1, now: Self.t0, getsStream: true)
        queue.streamStarted(1, on: 0, token: "jwt")
        for id in 2...5 { queue.arrive(id, now: Self.t0, getsStream: false) }
        #expect(queue.removeLined() == [2, 3, 4, 5])
        #expect(queue.count == 1)
        #expect(queue.isLineEmpty)
        #expect(queue.nextDeadline == Self.t0 + Self.timeout)
        #expect(queue.phase(of: 1) == .inFlight(0))
    }

    @Test func compactingKeepsTheLineOfRequestsThatStayed() {
        var queue = queue(maxQueued: 1000)
        for id in 0..<500 { queue.arrive(id, now: Self.t0, getsStream: false) }
        for id in 0..<499 {
            queue.leaveLine(id)
            queue.remove(id)
            queue.compactLines()
        }
        #expect(queue.deadlineEntries <= 2 * queue.count + 64)
        #expect(drain(&queue) == [499])
    }
}
