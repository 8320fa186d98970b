@testable import LiveDispatchCore
import Testing

@Suite("Priority budget")
struct PriorityBudgetTests {
    let t0 = 1_764_000_000.0

    func receive(_ coalescer: inout Coalescer, _ command: ActivityCommand, offset: Int64, at seconds: Double) -> LiveActivityPush? {
        coalescer.receive(command, offset: offset, recordTime: time(t0 + seconds), now: time(t0 + seconds)).flushed?.push
    }

    @Test("past the hour's priority-10 budget an update goes at 5; alerts, ends and starts keep 10; the hour slides")
    func downgrade() throws {
        var coalescer = Coalescer(configuration: .init(window: 0, priority10PerHour: 2))
        var offset: Int64 = 0
        func next(_ command: ActivityCommand, at seconds: Double) -> LiveActivityPush? {
            defer { offset += 1 }
            return receive(&coalescer, command, offset: offset, at: seconds)
        }
        let first = try #require(next(update("m", ["s": 1]), at: 0))
        let second = try #require(next(update("m", ["s": 2]), at: 10))
        let third = try #require(next(update("m", ["s": 3]), at: 20))
        #expect([first, second].map(\.priority) == [.immediate, .immediate])
        #expect(third.priority == .normal && third.downgradedFrom == .immediate)
        let alert = try #require(next(update("m", ["s": 4], alert: ActivityAlert(title: "Goal", body: "4")), at: 30))
        #expect(alert.priority == .immediate && alert.downgradedFrom == nil)
        // An hour after the first two, the budget has room again.
        let later = try #require(next(update("m", ["s": 5]), at: 3601))
        #expect(later.priority == .normal, "the alert at 30 s still counts")
        let afterAlert = try #require(next(update("m", ["s": 6]), at: 3631))
        #expect(afterAlert.priority == .immediate)
        let end = try #require(next(update("m", ["s": 7], event: .end), at: 3632))
        #expect(end.priority == .immediate)
    }

    @Test("an update that asked for 5 or 1 is never counted nor raised; no budget means no downgrade")
    func lowerPriorities() throws {
        var coalescer = Coalescer(configuration: .init(window: 0, priority10PerHour: 1))
        for (n, priority) in [PushPriority.normal, .low, .normal].enumerated() {
            let push = try #require(receive(&coalescer, update("m", ["s": .integer(Int64(n))], priority: priority), offset: Int64(n), at: Double(n)))
            #expect(push.priority == priority && push.downgradedFrom == nil)
        }
        #expect(try #require(receive(&coalescer, update("m", ["s": 9]), offset: 3, at: 4)).priority == .immediate)
        var unlimited = Coalescer(configuration: .init(window: 0))
        for n in 0..<100 {
            #expect(receive(&unlimited, update("u", ["s": .integer(Int64(n))]), offset: Int64(n), at: Double(n))?.priority == .immediate)
        }
    }

    @Test("the budget's times travel in the state snapshot, so a restart does not refill it")
    func snapshot() throws {
        var coalescer = Coalescer(configuration: .init(window: 0, priority10PerHour: 1))
        let flush = try #require(coalescer.receive(update("m", ["s": 1]), offset: 0, recordTime: time(t0), now: time(t0)).flushed)
        #expect(flush.snapshot.priority10SentAt == [time(t0)])
        let restored = try ActivityState(json: flush.snapshot.json)
        #expect(restored == flush.snapshot)
        var next = Coalescer(configuration: .init(window: 0, priority10PerHour: 1))
        next.restore(restored)
        #expect(receive(&next, update("m", ["s": 2]), offset: 1, at: 60)?.priority == .normal)
        #expect(throws: FieldError.self) {
            try ActivityState(json: ["activity_id": "a", "version": 1, "created_at": 1, "priority_10_at": ["soon"]])
        }
    }

    @Test("a downgraded push is reported, and its dead letters say so")
    func reported() throws {
        var harness = DispatcherHarness(configuration: .init(coalescer: .init(window: 0, priority10PerHour: 1)))
        harness.restore()
        let device = String(repeating: "ab", count: 32)
        harness.token(0, #"{"activity_id": "m", "token": "\#(device)"}"#)
        harness.command(0, #"{"activity_id": "m", "content_state": {"s": 1}}"#)
        harness.outcome = { _ in .permanent(reason: "BadPriority") }
        harness.command(1, #"{"activity_id": "m", "content_state": {"s": 2}}"#)
        let activity = try ActivityID("m")
        #expect(harness.observations.contains(.priorityDowngraded(activity, version: 2, from: .immediate, to: .normal)))
        #expect(harness.sent.map(\.push.priority) == [.immediate, .normal])
        let letter = try #require(try harness.deadLetters().last)
        #expect(letter.details["priority"] == 5 && letter.details["priority_downgraded_from"] == 10)
    }
}
