@testable import LiveDispatchCore
import Testing

/// The worker's limit on sends in flight, shared among its partitions by demand.
@Suite("the worker's send limit shared by demand")
struct SendLimitSharesTests {
    typealias Demand = SendLimitShares.Demand

    @Test("with no partition waiting, the shares are even")
    func evenWhenIdle() {
        let idle = Array(repeating: Demand(inFlight: 0, waiting: false), count: 6)
        #expect(SendLimitShares.shares(of: 4096, among: idle) == Array(repeating: 682, count: 6))
        #expect(SendLimitShares.shares(of: 4096, among: []) == [])
        #expect(SendLimitShares.shares(of: 3, among: idle) == Array(repeating: 1, count: 6), "never below 1")
    }

    @Test("one partition waiting gets what the others do not hold, less their reserves")
    func oneHugeActivity() {
        var demands = Array(repeating: Demand(inFlight: 0, waiting: false), count: 6)
        demands[2] = Demand(inFlight: 682, waiting: true)
        let shares = SendLimitShares.shares(of: 4096, among: demands)
        #expect(shares[2] == 4096 - 5 * 170)
        #expect(shares.enumerated().allSatisfy { $0.offset == 2 || $0.element == 170 })
        #expect(shares.reduce(0, +) == 4096)
    }

    @Test("an idle partition keeps what it has in flight; the waiting ones split the rest evenly")
    func idleKeepInFlight() {
        let demands = [
            Demand(inFlight: 600, waiting: false), Demand(inFlight: 10, waiting: false),
            Demand(inFlight: 300, waiting: true), Demand(inFlight: 300, waiting: true),
        ]
        let shares = SendLimitShares.shares(of: 4096, among: demands)
        // Even share 1024, reserve 256.
        #expect(shares == [600, 256, (4096 - 856) / 2, (4096 - 856) / 2])
        #expect(shares.reduce(0, +) <= 4096)
    }

    @Test("random demands: within the limit (but for the floors), waiting partitions equal, idle ones keep their sends")
    func randomDemands() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let count = Int(generator.next() % 12) + 1
            let limit = Int(generator.next() % 20_000) + 1
            let even = max(1, limit / count)
            let demands = (0..<count).map { _ in
                Demand(inFlight: Int(generator.next() % UInt64(even + 1)), waiting: generator.next() % 3 == 0)
            }
            let shares = SendLimitShares.shares(of: limit, among: demands)
            #expect(shares.count == count)
            #expect(shares.allSatisfy { $0 >= 1 })
            let waiting = zip(demands, shares).filter { $0.0.waiting }.map(\.1)
            #expect(Set(waiting).count <= 1)
            for (demand, share) in zip(demands, shares) where !demand.waiting && !waiting.isEmpty {
                #expect(share >= demand.inFlight)
            }
            // Idle partitions hold at most their even share each, so the
            // total only exceeds the limit when the floor of 1 lifts shares.
            if limit >= count * 4 { #expect(shares.reduce(0, +) <= limit) }
        }
    }

    @Test("a partition says its fan-outs wait once its limit is taken, and not after the limit rises")
    func partitionDemand() throws {
        var machine = PartitionDispatcher(
            partition: 0,
            configuration: .init(coalescer: .init(window: 0.1, maxDelay: 0.5), fanOut: .init(maxInFlight: 100), maxInFlight: 4))
        let activity = try ActivityID("huge")
        for number in 0..<20 {
            let registration = TokenRegistration(activityID: activity, token: try DeviceToken(bytes: Array(repeating: 0xAB, count: 31) + [UInt8(number)]))
            machine.restoreToken(key: registration.storeKey, value: registration.json.serialized())
        }
        let now = UnixTime(seconds: 1_764_000_000)
        _ = machine.finishRestore(now: now)
        #expect(machine.sendDemand == Demand(inFlight: 0, waiting: false))
        var actions = machine.command(.init(offset: 0, key: Array("huge".utf8), value: Array(#"{"activity_id": "huge", "content_state": {"score": 1}}"#.utf8), timestamp: now), now: now)
        actions += machine.timerFired(now: now + 1)
        #expect(actions.count { if case .send = $0 { true } else { false } } == 4)
        #expect(machine.sendDemand == Demand(inFlight: 4, waiting: true))
        let started = machine.setSendLimit(40, now: now + 1)
        #expect(started.count { if case .send = $0 { true } else { false } } == 16)
        #expect(machine.sendDemand == Demand(inFlight: 20, waiting: false))
    }
}
