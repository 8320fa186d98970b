@testable import LiveDispatchCore
import Testing

/// A partition's limit on sends in flight, shared in turn by its activities.
@Suite("the partition's send budget")
struct SendBudgetTests {
    var now = UnixTime(seconds: 1_764_000_000)

    static func activity(_ number: Int) throws -> ActivityID { try ActivityID("activity-\(number)") }

    static func token(_ activity: Int, _ number: Int) throws -> DeviceToken {
        try DeviceToken(bytes: Array(repeating: 0xC0, count: 30) + [UInt8(activity), UInt8(number)])
    }

    /// A restored partition holding `tokens` tokens for each of `activities` activities.
    func partition(limit: Int, perActivity: Int, activities: Int, tokens: Int) throws -> PartitionDispatcher {
        var machine = PartitionDispatcher(
            partition: 0,
            configuration: .init(coalescer: .init(window: 0.1, maxDelay: 0.5), fanOut: .init(maxInFlight: perActivity), maxInFlight: limit))
        for activity in 0..<activities {
            for number in 0..<tokens {
                let registration = TokenRegistration(activityID: try Self.activity(activity), token: try Self.token(activity, number))
                machine.restoreToken(key: registration.storeKey, value: registration.json.serialized())
            }
        }
        _ = machine.finishRestore(now: now)
        return machine
    }

    /// Sends one update to each activity and flushes them; returns the sends started.
    func publish(_ machine: inout PartitionDispatcher, activities: Int) throws -> [PartitionDispatcher.Send] {
        var actions: [PartitionDispatcher.Action] = []
        for activity in 0..<activities {
            let value = Array(#"{"activity_id": "activity-\#(activity)", "content_state": {"score": 1}}"#.utf8)
            actions += machine.command(.init(offset: Int64(activity), key: Array("activity-\(activity)".utf8), value: value, timestamp: now), now: now)
        }
        actions += machine.timerFired(now: now + 1)
        return Self.sends(actions)
    }

    static func sends(_ actions: [PartitionDispatcher.Action]) -> [PartitionDispatcher.Send] {
        actions.compactMap { if case .send(let send) = $0 { send } else { nil } }
    }

    @Test("a partition never has more sends in flight than its limit; a freed place goes to the activity first in line")
    func sharedInTurn() throws {
        var machine = try partition(limit: 5, perActivity: 4, activities: 3, tokens: 6)
        var inFlight = try publish(&machine, activities: 3)
        #expect(inFlight.count == 5)
        #expect(machine.sendsInFlight == 5)
        var delivered: [DeviceToken] = []
        var servedAfter: [(completed: ActivityID, started: [ActivityID])] = []
        while !inFlight.isEmpty {
            let send = inFlight.removeFirst()
            delivered.append(send.token)
            let started = Self.sends(machine.sendCompleted(send, outcome: .delivered, now: now + 1, jitter: 0))
            servedAfter.append((send.activityID, started.map(\.activityID)))
            inFlight += started
            #expect(inFlight.count <= 5)
            #expect(machine.sendsInFlight == inFlight.count)
        }
        #expect(Set(delivered).count == 18, "every token got the update once")
        #expect(delivered.count == 18)
        // While others wait, each completion starts one send for the first
        // in line, not for the activity that just finished one: the three
        // take turns.
        let whileWaiting = servedAfter.prefix(6)
        #expect(whileWaiting.allSatisfy { $0.started.count == 1 })
        #expect(servedAfter.first.map { $0.started != [$0.completed] } == true)
        let turns = whileWaiting.flatMap(\.started)
        #expect(try (0..<3).map(Self.activity).allSatisfy { activity in turns.filter { $0 == activity }.count == 2 })
        #expect(Array(turns.prefix(3)) == Array(turns.suffix(3)), "the same order in the second round")
        #expect(machine.sendsInFlight == 0)
    }

    @Test("under a larger limit a turn starts a run of sends: places freed are gathered first")
    func turnsInRuns() throws {
        // A limit of 64 gathers 2 places a turn.
        var machine = try partition(limit: 64, perActivity: 40, activities: 3, tokens: 50)
        var inFlight = try publish(&machine, activities: 3)
        #expect(inFlight.count == 64)
        let first = inFlight.removeFirst()
        #expect(Self.sends(machine.sendCompleted(first, outcome: .delivered, now: now + 1, jitter: 0)).isEmpty, "one place is not a turn")
        let second = inFlight.removeFirst()
        let run = Self.sends(machine.sendCompleted(second, outcome: .delivered, now: now + 1, jitter: 0))
        #expect(run.count == 2)
        #expect(Set(run.map(\.activityID)).count == 1, "one activity's turn")
        #expect(run.first?.activityID != first.activityID, "the first in line, not the one that finished")
        inFlight += run
        var delivered = 2
        while !inFlight.isEmpty {
            inFlight += Self.sends(machine.sendCompleted(inFlight.removeFirst(), outcome: .delivered, now: now + 1, jitter: 0))
            delivered += 1
            #expect(inFlight.count <= 64)
        }
        #expect(delivered == 150)
        #expect(machine.sendsInFlight == 0)
    }

    @Test("a higher limit starts the sends that waited for it; a lower one lets those in flight finish")
    func limitChanges() throws {
        var machine = try partition(limit: 1, perActivity: 4, activities: 2, tokens: 3)
        let first = try publish(&machine, activities: 2)
        #expect(first.count == 1)
        let more = Self.sends(machine.setSendLimit(10, now: now + 1))
        #expect(more.count == 5, "all six tokens of both activities in flight")
        #expect(machine.sendsInFlight == 6)
        #expect(machine.setSendLimit(2, now: now + 1).isEmpty)
        #expect(machine.sendLimit == 2)
        var inFlight = first + more
        while !inFlight.isEmpty {
            inFlight += Self.sends(machine.sendCompleted(inFlight.removeFirst(), outcome: .delivered, now: now + 1, jitter: 0))
        }
        #expect(machine.sendsInFlight == 0)
    }

    @Test("a send reported for an activity that is gone still frees its place")
    func goneActivity() throws {
        var machine = try partition(limit: 1, perActivity: 4, activities: 2, tokens: 2)
        let first = try publish(&machine, activities: 2)
        #expect(first.count == 1)
        var stray = try #require(first.first)
        stray.activityID = try ActivityID("expired-meanwhile")
        let next = Self.sends(machine.sendCompleted(stray, outcome: .delivered, now: now + 1, jitter: 0))
        #expect(next.count == 1)
        #expect(machine.sendsInFlight == 1)
    }
}
