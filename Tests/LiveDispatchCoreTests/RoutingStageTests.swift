import LiveDispatchCore
import Testing

@Suite("Routing stage")
struct RoutingStageTests {
    let scores = OffsetTracker.Partition(topic: "sports.scores", number: 0)
    let couriers = OffsetTracker.Partition(topic: "couriers", number: 3)
    let start = UnixTime(seconds: 1_000)

    func stage(high: Int = 10, low: Int = 4) -> RoutingStage {
        RoutingStage(gate: BackpressureGate(highWatermark: high, lowWatermark: low), handOverLimit: .seconds(30))
    }

    @Test("the worker's dispatching backlog counts with the router's own events; a draining router never resumes")
    func downstreamBacklog() {
        var stage = stage()
        #expect(stage.downstream(9) == [])
        #expect(stage.downstream(10) == [.pauseAll], "the dispatcher's backlog alone reaches the high watermark")
        #expect(stage.downstream(5) == [], "between the watermarks it stays paused")
        #expect(stage.downstream(4) == [.resumeAll])
        #expect(stage.assigned([scores]) == [])
        #expect(stage.read(scores, offset: 7, tracked: true, downstream: 9, now: start) == [.pauseAll], "one event of its own and nine waiting to be dispatched")
        _ = stage.drain(owned: [scores])
        #expect(stage.completed(scores, offset: 7, downstream: 0) == [.commit(scores, offset: 8)], "shutting down: the partitions stay paused")
        #expect(!stage.isPaused)
        #expect(stage.downstream(Int.max) == [.pauseAll], "a backlog past Int's range pauses instead of trapping")
    }

    @Test("partitions assigned while routing is paused, or while draining, are paused with the others")
    func assignedWhilePaused() {
        var stage = stage()
        #expect(stage.assigned([scores]) == [])
        _ = stage.downstream(10)
        #expect(stage.assigned([couriers]) == [.pause([couriers])])
        _ = stage.downstream(0)
        _ = stage.drain(owned: [scores, couriers])
        #expect(stage.assigned([scores]) == [.pause([scores])])
    }

    @Test("an event's offset is committed once it and every one before it completed, in any order")
    func commitsInOrder() {
        var stage = stage()
        _ = stage.assigned([scores])
        for offset in Int64(5)...7 { _ = stage.read(scores, offset: offset, tracked: true, downstream: 0, now: start) }
        #expect(stage.outstanding == 3)
        #expect(stage.completed(scores, offset: 7, downstream: 0) == [])
        #expect(stage.completed(scores, offset: 5, downstream: 0) == [.commit(scores, offset: 6)])
        #expect(stage.completed(scores, offset: 6, downstream: 0) == [.commit(scores, offset: 8)])
        #expect(stage.outstanding == 0)
    }

    @Test("a revoked partition is routed on from after its last event read, not when lost, unread or draining; its events in progress stop counting and never commit")
    func revokedPartitionsAreHandedOver() {
        var stage = stage()
        _ = stage.assigned([scores, couriers])
        _ = stage.read(scores, offset: 41, tracked: true, downstream: 0, now: start)
        #expect(stage.revoked([scores, couriers], lost: false, now: start) == [.startHandOver(scores, from: 42, paused: false)])
        #expect(stage.outstanding == 0)
        #expect(stage.completed(scores, offset: 41, downstream: 0) == [])
        #expect(stage.handingOver == [scores])

        var lost = self.stage()
        _ = lost.assigned([scores])
        _ = lost.read(scores, offset: 41, tracked: true, downstream: 0, now: start)
        #expect(lost.revoked([scores], lost: true, now: start) == [])

        var draining = self.stage()
        _ = draining.assigned([scores])
        _ = draining.read(scores, offset: 41, tracked: true, downstream: 0, now: start)
        _ = draining.drain(owned: [scores])
        #expect(draining.revoked([scores], lost: false, now: start) == [])
    }

    @Test("a hand-over starts paused while routing is; its events do not count as the group's; it ends when assigned again, at the new owner's commit, at its deadline, or at stop")
    func handOverLifecycle() {
        var stage = stage(high: 2, low: 1)
        _ = stage.assigned([scores, couriers])
        _ = stage.read(scores, offset: 10, tracked: true, downstream: 0, now: start)
        _ = stage.read(couriers, offset: 20, tracked: true, downstream: 5, now: start)
        #expect(stage.isPaused)
        #expect(stage.revoked([scores, couriers], lost: false, now: start) == [
            .startHandOver(scores, from: 11, paused: true), .startHandOver(couriers, from: 21, paused: true),
        ])
        #expect(stage.read(scores, offset: 11, tracked: false, downstream: 0, now: start + 1) == [.resumeAll])
        #expect(stage.outstanding == 0, "an event read on the hand-over reader is never committed")
        #expect(stage.nextDeadline == start + 30)
        #expect(stage.assigned([couriers]) == [.stopHandOver(couriers, .assignedAgain)])
        #expect(stage.committed([scores: 11]) == [], "the new owner's first commit sets the target past what was routed here")
        #expect(stage.committed([scores: 12]) == [.stopHandOver(scores, .newOwnerRoutes)])
        #expect(stage.nextDeadline == nil)
        #expect(stage.isHandOverIdle)

        _ = stage.read(couriers, offset: 21, tracked: true, downstream: 0, now: start + 2)
        #expect(stage.revoked([couriers], lost: false, now: start + 2) == [.startHandOver(couriers, from: 22, paused: false)])
        #expect(stage.timerFired(now: start + 31.9) == [])
        #expect(stage.timerFired(now: start + 32) == [.stopHandOver(couriers, .timedOut)])

        _ = stage.assigned([scores])
        _ = stage.read(scores, offset: 30, tracked: true, downstream: 0, now: start + 40)
        let owned = stage.drain(owned: [scores])
        #expect(owned.map(\.partition) == [scores] && owned.map(\.lastRead) == [30])
        #expect(stage.leaving(owned, now: start + 40, within: .seconds(10)) == [.startHandOver(scores, from: 31, paused: false)])
        #expect(stage.nextDeadline == start + 41, "a quiet partition stops after a second while leaving")
        #expect(stage.stop() == [.stopHandOver(scores, .stopping)])
        #expect(stage.nextDeadline == nil)
    }
}
