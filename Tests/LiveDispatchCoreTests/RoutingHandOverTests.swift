import LiveDispatchCore
import Testing

@Suite("Routing hand-over: a domain partition given up is routed until its new owner routes it")
struct RoutingHandOverTests {
    let start = UnixTime(seconds: 1_000)

    @Test("a revoked partition goes on from the offset after the last one read, and stops once the group committed past it")
    func stopsWhenTheNewOwnerCommits() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        #expect(handOver.revoked(4, lastRead: 99, now: start) == .start(4, from: 100))
        #expect(handOver.partitions == [4])
        // Revoked again while lingering: nothing new.
        #expect(handOver.revoked(4, lastRead: 120, now: start + 1) == nil)
        // The commit this router made at the revocation, or the new owner's
        // before it routed anything: not past where this router stopped.
        #expect(handOver.committed([4: 100]).isEmpty)
        #expect(handOver.committed([4: 57]).isEmpty)
        #expect(handOver.partitions == [4])
        #expect(handOver.committed([4: 101]) == [.stop(4, .newOwnerRoutes)])
        #expect(handOver.partitions.isEmpty)
        // A late report changes nothing.
        #expect(handOver.committed([4: 180]).isEmpty)
    }

    @Test("the new owner starts behind what was routed here: the hand-over ends once it commits as far as this router had routed when it was first seen")
    func stopsWhenTheNewOwnerCaughtUp() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(3, lastRead: 99, now: start)
        for offset in Int64(100)...150 { handOver.routed(3, offset: offset, now: start) }
        // The new owner committed past the revocation point: it routes, from behind.
        #expect(handOver.committed([3: 101]).isEmpty)
        // This router goes on; the target stays where it was set.
        for offset in Int64(151)...170 { handOver.routed(3, offset: offset, now: start) }
        #expect(handOver.committed([3: 150]).isEmpty)
        #expect(handOver.committed([3: 151]) == [.stop(3, .newOwnerRoutes)])
    }

    @Test("nothing read since the assignment: no position to go on from, nothing routed")
    func nothingRead() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        #expect(handOver.revoked(2, lastRead: nil, now: start) == nil)
        #expect(handOver.partitions.isEmpty)
    }

    @Test("a partition given back stops lingering at once; one never lingering is ignored")
    func assignedAgain() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(1, lastRead: 10, now: start)
        _ = handOver.revoked(2, lastRead: 20, now: start)
        #expect(handOver.assigned(1) == .stop(1, .assignedAgain))
        #expect(handOver.assigned(3) == nil)
        #expect(handOver.partitions == [2])
    }

    @Test("lingering ends at the limit without a sign of the new owner")
    func timesOut() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(1, lastRead: 10, now: start)
        _ = handOver.revoked(2, lastRead: 20, now: start + 10)
        #expect(handOver.expire(now: start + 29).isEmpty)
        #expect(handOver.expire(now: start + 30) == [.stop(1, .timedOut)])
        #expect(handOver.expire(now: start + 39).isEmpty)
        #expect(handOver.expire(now: start + 40) == [.stop(2, .timedOut)])
    }

    @Test("stopping ends every hand-over and starts no new one")
    func stopping() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(1, lastRead: 10, now: start)
        #expect(handOver.stop() == [.stop(1, .stopping)])
        #expect(handOver.revoked(2, lastRead: 5, now: start) == nil)
        #expect(handOver.partitions.isEmpty)
    }

    @Test("random sequences, leaving among them: every partition started is stopped exactly once, never two at once, and never past its limit")
    func randomSequences() {
        var generator = SplitMix64(seed: 29)
        for _ in 0..<500 {
            var handOver = RoutingHandOver<Int>(limit: .seconds(5))
            var open: [Int: (from: Int64, since: UnixTime)] = [:]
            var now = start
            var read: [Int: Int64] = [:]
            var leavingDeadline: UnixTime?
            for _ in 0..<60 {
                now = now + Double(generator.next() % 2_000) / 1_000
                let partition = Int(generator.next() % 4)
                var actions: [RoutingHandOver<Int>.Action] = []
                let step = generator.next() % 7
                switch step {
                case 0:
                    read[partition, default: 0] += Int64(generator.next() % 10)
                    actions += [handOver.revoked(partition, lastRead: generator.next() % 4 == 0 ? nil : read[partition], now: now)].compactMap { $0 }
                case 1: actions += [handOver.assigned(partition)].compactMap { $0 }
                case 2: actions += handOver.committed([partition: read[partition, default: 0] + Int64(generator.next() % 3)])
                case 3:
                    let due = handOver.nextDeadline.map { now >= $0 } ?? false
                    let stopped = handOver.expire(now: now)
                    #expect(stopped.isEmpty == !due, "expire stops something exactly when the next deadline has passed")
                    actions += stopped
                case 4:
                    read[partition, default: 0] += 1
                    handOver.routed(partition, offset: read[partition, default: 0], now: now)
                case 5 where generator.next() % 4 == 0:
                    let owned = (0..<4).map { (partition: $0, lastRead: read[$0]) }
                    actions += handOver.leaving(owned, now: now, within: .seconds(3))
                    if leavingDeadline == nil { leavingDeadline = now + 3 }
                default: break
                }
                for action in actions {
                    switch action {
                    case .start(let partition, let from):
                        #expect(open[partition] == nil, "started twice")
                        open[partition] = (from, now)
                    case .stop(let partition, let reason):
                        let entry = open.removeValue(forKey: partition)
                        #expect(entry != nil, "stopped without a start")
                        if reason == .timedOut, let entry {
                            #expect(now >= entry.since + 5 || leavingDeadline.map { now >= $0 } == true)
                        }
                        if reason == .quiet { #expect(leavingDeadline != nil, "quiet without leaving") }
                    }
                }
                #expect(Set(handOver.partitions) == Set(open.keys))
                if step == 3 {
                    for (partition, entry) in open {
                        #expect(now < entry.since + 5, "\(partition) lingered past the limit")
                        if let leavingDeadline { #expect(now < leavingDeadline, "\(partition) lingered past the leaving bound") }
                    }
                }
            }
            for action in handOver.stop() {
                if case .stop(let partition, .stopping) = action { open[partition] = nil }
            }
            #expect(open.isEmpty)
        }
    }

    @Test("leaving: every partition owned is handed over; one goes until the new owner routes it, a quiet one stops after a second")
    func leavingHandsOverEachPartition() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        let actions = handOver.leaving([(1, 10), (2, 20), (3, nil)], now: start, within: .seconds(10))
        #expect(actions == [.start(1, from: 11), .start(2, from: 21)])
        // The group's revocation at the close starts nothing more.
        #expect(handOver.revoked(3, lastRead: 30, now: start) == nil)
        #expect(handOver.leaving([(3, 30)], now: start, within: .seconds(10)).isEmpty)
        // Partition 1 keeps routing records; partition 2 has none.
        handOver.routed(1, offset: 11, now: start + 0.6)
        #expect(handOver.expire(now: start + 0.9).isEmpty)
        handOver.routed(1, offset: 12, now: start + 1.2)
        #expect(handOver.expire(now: start + 1.5) == [.stop(2, .quiet)])
        #expect(!handOver.isIdle)
        #expect(handOver.committed([1: 11]).isEmpty)
        #expect(handOver.committed([1: 13]) == [.stop(1, .newOwnerRoutes)])
        #expect(handOver.isIdle)
    }

    @Test("leaving: a busy partition nobody takes stops at the leaving bound, not the hand-over limit")
    func leavingBound() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.leaving([(5, 50)], now: start, within: .seconds(3))
        for millisecond in stride(from: 100, to: 3_000, by: 100) {
            let now = start + Double(millisecond) / 1_000
            handOver.routed(5, offset: 50 + Int64(millisecond / 100), now: now)
            #expect(handOver.expire(now: now).isEmpty)
        }
        #expect(handOver.expire(now: start + 3) == [.stop(5, .timedOut)])
        #expect(handOver.isIdle)
    }

    @Test("the next deadline is the earliest limit, and while leaving the leaving bound or the end of a quiet spell; none when nothing lingers")
    func nextDeadline() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        #expect(handOver.nextDeadline == nil)
        _ = handOver.revoked(1, lastRead: 10, now: start)
        _ = handOver.revoked(2, lastRead: 20, now: start + 10)
        #expect(handOver.nextDeadline == start + 30)
        #expect(handOver.expire(now: start + 29.999).isEmpty)
        #expect(handOver.expire(now: start + 30) == [.stop(1, .timedOut)])
        #expect(handOver.nextDeadline == start + 40)
        _ = handOver.leaving([(3, 30)], now: start + 31, within: .seconds(5))
        handOver.routed(2, offset: 21, now: start + 31.5)
        #expect(handOver.nextDeadline == start + 32, "partition 3, quiet for a second")
        #expect(handOver.expire(now: start + 32) == [.stop(3, .quiet)])
        #expect(handOver.nextDeadline == start + 32.5, "partition 2, quiet for a second")
        handOver.routed(2, offset: 22, now: start + 32.4)
        handOver.routed(2, offset: 23, now: start + 33.3)
        handOver.routed(2, offset: 24, now: start + 34.2)
        handOver.routed(2, offset: 25, now: start + 35.1)
        #expect(handOver.nextDeadline == start + 36, "the leaving bound")
        #expect(handOver.expire(now: start + 36) == [.stop(2, .timedOut)])
        #expect(handOver.nextDeadline == nil)
    }

    @Test("quiet partitions stop only when leaving: a rebalance's hand-over waits for the new owner")
    func quietOnlyWhenLeaving() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(7, lastRead: 70, now: start)
        #expect(handOver.expire(now: start + 5).isEmpty)
        #expect(handOver.partitions == [7])
    }
}
