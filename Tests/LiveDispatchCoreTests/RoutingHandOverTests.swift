import LiveDispatchCore
import Testing

@Suite("Routing hand-over: a domain partition given up is routed until its new owner routes it")
struct RoutingHandOverTests {
    let start = ContinuousClock.now

    @Test("a revoked partition goes on from the offset after the last one read, and stops once the group committed past it")
    func stopsWhenTheNewOwnerCommits() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        #expect(handOver.revoked(4, lastRead: 99, now: start) == .start(4, from: 100))
        #expect(handOver.partitions == [4])
        // Revoked again while lingering: nothing new.
        #expect(handOver.revoked(4, lastRead: 120, now: start + .seconds(1)) == nil)
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
        _ = handOver.revoked(2, lastRead: 20, now: start + .seconds(10))
        #expect(handOver.expire(now: start + .seconds(29)).isEmpty)
        #expect(handOver.expire(now: start + .seconds(30)) == [.stop(1, .timedOut)])
        #expect(handOver.expire(now: start + .seconds(39)).isEmpty)
        #expect(handOver.expire(now: start + .seconds(40)) == [.stop(2, .timedOut)])
    }

    @Test("stopping ends every hand-over and starts no new one")
    func stopping() {
        var handOver = RoutingHandOver<Int>(limit: .seconds(30))
        _ = handOver.revoked(1, lastRead: 10, now: start)
        #expect(handOver.stop() == [.stop(1, .stopping)])
        #expect(handOver.revoked(2, lastRead: 5, now: start) == nil)
        #expect(handOver.partitions.isEmpty)
    }

    @Test("random sequences: every partition started is stopped exactly once, never two at once, and never past its limit")
    func randomSequences() {
        var generator = SplitMix64(seed: 29)
        for _ in 0..<500 {
            var handOver = RoutingHandOver<Int>(limit: .seconds(5))
            var open: [Int: (from: Int64, since: ContinuousClock.Instant)] = [:]
            var now = start
            var read: [Int: Int64] = [:]
            for _ in 0..<60 {
                now += .milliseconds(Int64(generator.next() % 2_000))
                let partition = Int(generator.next() % 4)
                var actions: [RoutingHandOver<Int>.Action] = []
                let step = generator.next() % 5
                switch step {
                case 0:
                    read[partition, default: 0] += Int64(generator.next() % 10)
                    actions += [handOver.revoked(partition, lastRead: generator.next() % 4 == 0 ? nil : read[partition], now: now)].compactMap { $0 }
                case 1: actions += [handOver.assigned(partition)].compactMap { $0 }
                case 2: actions += handOver.committed([partition: read[partition, default: 0] + Int64(generator.next() % 3)])
                case 3: actions += handOver.expire(now: now)
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
                        if reason == .timedOut, let entry { #expect(now - entry.since >= .seconds(5)) }
                    }
                }
                #expect(Set(handOver.partitions) == Set(open.keys))
                if step == 3 {
                    for (partition, entry) in open { #expect(now - entry.since < .seconds(5), "\(partition) lingered past the limit") }
                }
            }
            for action in handOver.stop() {
                if case .stop(let partition, .stopping) = action { open[partition] = nil }
            }
            #expect(open.isEmpty)
        }
    }
}
