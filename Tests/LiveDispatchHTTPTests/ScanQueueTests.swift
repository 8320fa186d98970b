@testable import LiveDispatchHTTP
import Synchronization
import Testing

/// Reads of internal topics: one runs, the others wait their turn, one per caller.
@Suite("Kafka reads queued per caller")
struct ScanQueueTests {
    @Test("callers wait in arrival order; a caller's second read and one past the capacity are refused")
    func machine() {
        var queue = ScanQueue(capacity: 2)
        #expect(queue.enter(1, caller: "a") == .run)
        #expect(queue.enter(2, caller: "b") == .wait)
        #expect(queue.enter(3, caller: "a") == .callerBusy)
        #expect(queue.enter(4, caller: "b") == .callerBusy)
        #expect(queue.enter(5, caller: "c") == .wait)
        #expect(queue.enter(6, caller: "d") == .full)
        #expect(queue.leave(1) == 2)
        #expect(queue.enter(7, caller: "a") == .wait, "a's read is over: it may queue again")
        #expect(queue.leave(2) == 5)
        #expect(queue.leave(5) == 7)
        #expect(queue.leave(7) == nil)
        #expect(queue.enter(8, caller: "b") == .run)
    }

    @Test("a waiting caller that leaves is taken out; leaving with a ticket that does not run changes nothing")
    func cancel() {
        var queue = ScanQueue(capacity: 4)
        #expect(queue.enter(1, caller: "a") == .run)
        #expect(queue.enter(2, caller: "b") == .wait)
        #expect(queue.enter(3, caller: "c") == .wait)
        let waited = queue.cancel(2)
        #expect(waited)
        let ran = queue.cancel(1)
        #expect(!ran, "a running read is left, not cancelled")
        #expect(queue.leave(2) == nil)
        #expect(queue.leave(1) == 3)
        #expect(queue.waitingCount == 0)
    }

    @Test("the gate: a second caller waits for the first and then reads; the first caller's second read is refused")
    func gate() async throws {
        let gate = WorkerHTTPServer.ScanGate()
        let first = try await gate.enter(caller: "a")
        await #expect(throws: WorkerHTTPServer.ScanGate.Busy.self) { _ = try await gate.enter(caller: "a") }
        let entered = Mutex(false)
        let second = Task {
            let ticket = try await gate.enter(caller: "b")
            entered.withLock { $0 = true }
            gate.leave(ticket)
        }
        // b waits while a reads.
        await Task.yield()
        #expect(!entered.withLock { $0 })
        gate.leave(first)
        try await second.value
        #expect(entered.withLock { $0 })
        let again = try await gate.enter(caller: "a")
        gate.leave(again)
    }

    @Test("the gate: a waiting caller whose request is cancelled leaves the queue and the next one reads")
    func gateCancel() async throws {
        let gate = WorkerHTTPServer.ScanGate()
        let first = try await gate.enter(caller: "a")
        let waiting = Task { try await gate.enter(caller: "b") }
        let third = Task { () -> Bool in
            let ticket = try await gate.enter(caller: "c")
            gate.leave(ticket)
            return true
        }
        waiting.cancel()
        await #expect(throws: WorkerHTTPServer.ScanGate.Busy.self) { _ = try await waiting.value }
        gate.leave(first)
        #expect(try await third.value)
    }
}
