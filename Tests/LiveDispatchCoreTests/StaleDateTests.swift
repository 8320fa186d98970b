@testable import LiveDispatchCore
import Testing

/// Stale dates, relevance and dismissal across updates, ends and restarts:
/// no push goes out already stale, and an end carries only its own.
@Suite("Stale and final dates")
struct StaleDateTests {
    let match = try! ActivityID("match-42")
    let t0 = 1_764_000_000.0

    func flushed(_ coalescer: inout Coalescer, _ command: ActivityCommand, offset: Int64, at seconds: Double) throws -> Coalescer.Flush {
        let action = coalescer.receive(command, offset: offset, recordTime: time(seconds), now: time(seconds))
        if let flush = action.flushed { return flush }
        return try #require(coalescer.timerFired(for: match, now: time(seconds + 1)).flushed)
    }

    @Test("a stale date that has passed is not carried into a later update, whose push then expires in the future")
    func passedStaleDateIsDropped() throws {
        var coalescer = Coalescer()
        let first = try flushed(&coalescer, update("match-42", ["a": 1], stale: t0 + 60), offset: 0, at: t0)
        #expect(first.push.staleDate == time(t0 + 60))
        // Two minutes on, an update naming no stale date.
        let late = try flushed(&coalescer, update("match-42", ["a": 2]), offset: 1, at: t0 + 120)
        #expect(late.push.staleDate == nil)
        #expect(late.snapshot.staleDate == nil)
        #expect(APNsRequest.expiration(of: late.push, sentAt: time(t0 + 120)) > time(t0 + 120))
        // One still ahead is carried by the updates that name none.
        _ = try flushed(&coalescer, update("match-42", ["a": 3], stale: t0 + 600), offset: 2, at: t0 + 130)
        let carried = try flushed(&coalescer, update("match-42", ["a": 4]), offset: 3, at: t0 + 140)
        #expect(carried.push.staleDate == time(t0 + 600))
        #expect(APNsRequest.expiration(of: carried.push, sentAt: time(t0 + 140)) == time(t0 + 600))
    }

    @Test("an end carries only its own stale date and relevance, also when its push is sent again after a restart")
    func endCarriesItsOwn() throws {
        var coalescer = Coalescer()
        let scored = ActivityCommand(activityID: match, contentState: ["a": 1], staleDate: time(t0 + 600), relevanceScore: 50)
        _ = try flushed(&coalescer, scored, offset: 0, at: t0)
        let end = try flushed(&coalescer, update("match-42", ["a": 2], event: .end), offset: 1, at: t0 + 10)
        #expect(end.push.event == .end && end.push.staleDate == nil && end.push.relevanceScore == nil)
        // What a restarted worker sends the tokens that had not yet got the end.
        let restored = PartitionDispatcher.restoredPush(end.snapshot, configuration: .init())
        #expect(restored.event == .end)
        #expect(restored.staleDate == nil && restored.relevanceScore == nil)

        var other = Coalescer()
        _ = try flushed(&other, scored, offset: 0, at: t0)
        let ownDates = ActivityCommand(
            activityID: match, event: .end, staleDate: time(t0 + 900), dismissalDate: time(t0 + 1_000), relevanceScore: 10)
        let ended = try flushed(&other, ownDates, offset: 1, at: t0 + 10)
        let again = PartitionDispatcher.restoredPush(ended.snapshot, configuration: .init())
        for push in [ended.push, again] {
            #expect(push.staleDate == time(t0 + 900) && push.relevanceScore == 10 && push.dismissalDate == time(t0 + 1_000))
        }
    }
}
