import Testing

@testable import LiveDispatchCore

/// The restore and catch-up machine, called directly.
@Suite("a partition's restore and catch-up")
struct PartitionRestoreTests {
    static func activity(_ name: String) throws -> ActivityID { try ActivityID(name) }

    static func flush(_ activity: ActivityID, version: UInt64, event: ActivityEvent = .update, score: Int64, offsets: [Int64]) -> Coalescer.Flush {
        let push = LiveActivityPush(
            activityID: activity, version: version, event: event, contentState: ["score": .integer(score)], timestamp: time(Double(version)))
        let snapshot = ActivityState(activityID: activity, contentState: ["score": .integer(score)], version: version, createdAt: time(0))
        return Coalescer.Flush(push: push, snapshot: snapshot, offsets: offsets)
    }

    static func record(_ offset: Int64) -> PartitionDispatcher.Record {
        PartitionDispatcher.Record(offset: offset, key: nil, value: nil, timestamp: time(0))
    }

    @Test("records wait while restoring and are handed back once, in order, with the newest snapshot of each activity")
    func buffersUntilFinished() throws {
        var restore = PartitionRestore()
        let first = ActivityState(activityID: try Self.activity("a"), version: 1, createdAt: time(0))
        let newer = ActivityState(activityID: try Self.activity("a"), version: 2, createdAt: time(0))
        let gone = ActivityState(activityID: try Self.activity("b"), version: 1, createdAt: time(0))
        restore.restore(first)
        restore.restore(gone)
        restore.restore(newer)
        restore.removeState(key: "b")
        let buffered = [restore.buffer(.commands, Self.record(7)), restore.buffer(.tokens, Self.record(3))]
        #expect(buffered == [true, true])
        #expect(restore.isRestoring)

        let finish = restore.finish(now: time(10), catchUpLimit: 30)
        let finished = try #require(finish)
        #expect(finished.states == [newer])
        #expect(finished.early.map(\.0) == [.commands, .tokens])
        #expect(finished.early.map(\.1.offset) == [7, 3])
        #expect(!restore.isRestoring)
        let again = restore.finish(now: time(11), catchUpLimit: 30)
        #expect(again == nil, "a restore finishes once")
        let late = restore.buffer(.commands, Self.record(8))
        #expect(!late, "after the restore, records are handled at once")
    }

    @Test("a new owner holds each activity's flushes, merged, until the replay's last command is read")
    func holdsUntilReplayRead() throws {
        var restore = PartitionRestore()
        restore.holdPushes(untilCommandOffset: 5)
        #expect(restore.isCatchingUp)
        _ = restore.finish(now: time(0), catchUpLimit: 30)
        let (a, b) = (try Self.activity("a"), try Self.activity("b"))
        let held = [
            restore.hold(Self.flush(b, version: 1, score: 1, offsets: [0])),
            restore.hold(Self.flush(a, version: 1, event: .start, score: 1, offsets: [1])),
            restore.hold(Self.flush(a, version: 2, score: 2, offsets: [2, 3])),
        ]
        #expect(held == [true, true, true])
        #expect(!restore.holdsNothing)
        #expect(restore.read(commandOffset: 3).isEmpty, "offset 4 is still to be read")

        let released = restore.read(commandOffset: 4)
        #expect(released.map(\.push.activityID) == [a, b], "by activity id")
        #expect(released.first?.push.version == 2)
        #expect(released.first?.push.event == .start, "the start a device may have missed is kept")
        #expect(released.first?.offsets == [1, 2, 3])
        #expect(!restore.isCatchingUp && restore.holdsNothing)
        let heldAfter = restore.hold(Self.flush(a, version: 3, score: 3, offsets: [5]))
        #expect(!heldAfter, "nothing is held after the catch-up")
    }

    @Test("the held pushes go at the catch-up limit if the replay is not read by then; an empty partition holds nothing")
    func limitAndEmptyPartition() throws {
        var restore = PartitionRestore()
        restore.holdPushes(untilCommandOffset: 100)
        #expect(restore.deadline == nil, "the limit counts from the end of the restore")
        _ = restore.finish(now: time(10), catchUpLimit: 30)
        #expect(restore.deadline == time(40))
        let a = try Self.activity("a")
        _ = restore.hold(Self.flush(a, version: 1, score: 1, offsets: [0]))
        #expect(restore.timerFired(now: time(39)).isEmpty)
        let due = restore.timerFired(now: time(40))
        #expect(due.map(\.push.version) == [1])
        #expect(restore.deadline == nil)

        var empty = PartitionRestore()
        empty.holdPushes(untilCommandOffset: 0)
        #expect(!empty.isCatchingUp)
        var late = PartitionRestore()
        _ = late.finish(now: time(0), catchUpLimit: 30)
        late.holdPushes(untilCommandOffset: 9)
        #expect(!late.isCatchingUp, "only a partition still restoring catches up")
    }

    @Test("two held flushes merge into the newer state, the latest alert and the highest priority")
    func merging() throws {
        let a = try Self.activity("a")
        var older = Self.flush(a, version: 1, event: .start, score: 1, offsets: [1])
        older.push.alert = ActivityAlert(title: "Kick-off", body: "")
        older.push.priority = PushPriority.immediate
        older.push.inputPushToken = true
        var newer = Self.flush(a, version: 2, score: 2, offsets: [2])
        newer.push.priority = PushPriority.normal
        let merged = Coalescer.Flush.merged(older, newer)
        #expect(merged.push.version == 2 && merged.push.contentState == ["score": .integer(2)])
        #expect(merged.push.event == .start && merged.push.inputPushToken == true)
        #expect(merged.push.alert == older.push.alert)
        #expect(merged.push.priority == PushPriority.immediate)
        #expect(merged.offsets == [1, 2])
    }
}
