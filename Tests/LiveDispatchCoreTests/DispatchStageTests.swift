import LiveDispatchCore
import Testing

@Suite("Dispatch stage: the dispatcher's decisions over the partitions a worker holds")
struct DispatchStageTests {
    let start = UnixTime(seconds: 1_764_000_000)

    static func stage(linger: Double = 0, release: Double = 2, high: Int = 10, low: Int = 4, sendLimit: Int = 100) -> DispatchStage {
        DispatchStage(configuration: .init(
            ownership: .init(releaseTimeout: release, lingerTimeout: linger), highWatermark: high, lowWatermark: low, sendLimit: sendLimit))
    }

    /// Takes `numbers` (nobody lingering) and restores them.
    func own(_ stage: inout DispatchStage, _ numbers: [Int32], now: UnixTime) {
        _ = stage.assigned(numbers, now: now)
        for number in numbers {
            _ = stage.markRead(number, .released, now: now)
            let followed = stage.follow(number)
            #expect(followed)
            _ = stage.restored(number, catchingUp: false, now: now)
        }
    }

    @Test("the stage is joining until both groups assigned it, standby with nothing, restoring, then ready")
    func phases() {
        var stage = Self.stage()
        #expect(stage.phase == .joining)
        _ = stage.assigned([], now: start)
        #expect(stage.phase == .joining)
        stage.routerAssigned()
        #expect(stage.phase == .standby)
        #expect(stage.assigned([1], now: start) == [.take(1), .setSendLimit(1, 100)])
        #expect(stage.phase == .restoring)
        #expect(stage.markRead(1, .released, now: start) == [.restore(1)])
        let followed = stage.follow(1)
        #expect(followed)
        #expect(stage.restored(1, catchingUp: false, now: start + 0.5) == [.resume([1]), .observe(.handOver(.takenOver(1, seconds: 0.5)))])
        #expect(stage.phase == .ready)
        // A lost assignment: joining again until the group assigns anew.
        let lost = stage.revoked([1], lost: true, now: start + 1)
        #expect(lost.contains(.release(1, commit: false, unfollow: true, lingered: false)))
        #expect(stage.phase == .joining)
        stage.drain()
        #expect(stage.phase == .draining)
        #expect(!stage.reportsIdle)
        _ = stage.leave(now: start + 2)
        #expect(stage.reportsIdle)
    }

    @Test("a released partition stops being followed, and one that lingered stops its commands being read")
    func releaseCarriesWhatToLetGo() {
        var stage = Self.stage(linger: 5)
        own(&stage, [0, 1], now: start)
        #expect(stage.revoked([1], lost: false, now: start + 1) == [.linger(1), .mark(1, .lingering(until: start + 6))])
        #expect(stage.lingering == [1])
        #expect(stage.markRead(1, .claimed(until: start + 6), now: start + 2).contains(.quiesce(1)))
        let released = stage.settled(1, now: start + 2.5)
        #expect(released.first == .release(1, commit: true, unfollow: true, lingered: true))
        #expect(released.contains(.mark(1, .released)))
        // The remaining partition gets the whole limit.
        #expect(released.contains(.setSendLimit(0, 100)))
        #expect(stage.followed == [0])
        #expect(stage.lingering.isEmpty)
        // A partition released before it followed anything has nothing to unfollow.
        _ = stage.assigned([2], now: start + 3)
        #expect(stage.revoked([2], lost: false, now: start + 3).contains(.release(2, commit: true, unfollow: false, lingered: false)))
        let followedAfterRelease = stage.follow(2)
        #expect(!followedAfterRelease)
        #expect(stage.followed == [0])
    }

    @Test("back-pressure pauses the restored partitions but one catching up, holds that one once it caught up, and resumes all below the low watermark")
    func backpressure() {
        var stage = Self.stage(high: 10, low: 4)
        own(&stage, [0, 1], now: start)
        _ = stage.assigned([2], now: start)
        _ = stage.markRead(2, .released, now: start)
        #expect(stage.outstandingMoved(to: 9).isEmpty)
        #expect(stage.outstandingMoved(to: 10) == [.pause([0, 1]), .observe(.paused)])
        // Restored while paused and catching up: it reads on.
        #expect(stage.restored(2, catchingUp: true, now: start + 1).first == .resume([2]))
        #expect(stage.outstandingMoved(to: 12).isEmpty)
        #expect(stage.caughtUp(2) == [.pause([2]), .observe(.heldOnceCaughtUp([2]))])
        #expect(stage.caughtUp(2).isEmpty)
        #expect(stage.outstandingMoved(to: 5).isEmpty)
        #expect(stage.outstandingMoved(to: 4) == [.resume([0, 1, 2]), .observe(.resumed)])
        // Restored while paused, not catching up: held until the resume.
        _ = stage.outstandingMoved(to: 11)
        _ = stage.assigned([3], now: start + 2)
        _ = stage.markRead(3, .released, now: start + 2)
        #expect(!stage.restored(3, catchingUp: false, now: start + 3).contains { if case .resume = $0 { true } else { false } })
        #expect(stage.outstandingMoved(to: 0) == [.resume([0, 1, 2, 3]), .observe(.resumed)])
    }

    @Test("the send limit follows demand, recomputed only when a partition's demand changed")
    func sendLimitShares() {
        var stage = Self.stage(sendLimit: 100)
        own(&stage, [0, 1], now: start)
        #expect(stage.sendLimits == [0: 50, 1: 50])
        #expect(stage.demandChanged(0, .init(inFlight: 50, waiting: true)) == [.setSendLimit(0, 88), .setSendLimit(1, 12)])
        #expect(stage.demandChanged(0, .init(inFlight: 50, waiting: true)).isEmpty)
        #expect(stage.demandChanged(0, .init(inFlight: 3, waiting: false)) == [.setSendLimit(0, 50), .setSendLimit(1, 50)])
        // Not held: ignored.
        #expect(stage.demandChanged(7, .init(inFlight: 1, waiting: true)).isEmpty)
    }

    @Test("unread commands count from the last read to the end as fetched or as written by this worker's router")
    func unread() {
        var stage = Self.stage()
        own(&stage, [0], now: start)
        #expect(stage.unread(0, next: 10, fetched: 15) == 5)
        stage.commandWritten(0, offset: 19)
        stage.commandWritten(0, offset: 3)
        #expect(stage.writtenEnds == [0: 20])
        #expect(stage.unread(0, next: 10, fetched: 15) == 10)
        #expect(stage.unread(0, next: -1, fetched: 15) == 0)
        #expect(!stage.hasReadAll(0, next: 15, fetched: 15))
        #expect(stage.hasReadAll(0, next: 20, fetched: 15))
        #expect(!stage.hasReadAll(0, next: 20, fetched: nil))
        #expect(!stage.hasReadAll(1, next: 20, fetched: 15))
    }
}
