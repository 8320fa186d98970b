import LiveDispatchCore
import Testing

/// Drives a `Coalescer` and one `FanOut` per activity the way the dispatcher
/// does, over a random command sequence, with timers firing late, early,
/// twice and out of order, and sends completing in random order with
/// random retryable failures. Records what every token received.
struct DispatchSimulation {
    struct Pending {
        enum Kind {
            case flushTimer(ActivityID)
            case retryWake(ActivityID)
            case sendDone(ActivityID, DeviceToken, LiveActivityPush)
        }
        var kind: Kind
        var due: Double
    }

    var generator: SplitMix64
    var coalescer = Coalescer(configuration: .init(window: 0.25, maxDelay: 1.0))
    var fanOuts: [ActivityID: FanOut] = [:]
    var tracker = OffsetTracker()
    let partition = OffsetTracker.Partition(topic: "commands", number: 0)
    var pending: [Pending] = []
    var offsetsByVersion: [ActivityID: [(version: UInt64, offsets: [Int64])]] = [:]
    var received: [DeviceToken: [LiveActivityPush]] = [:]
    var flushes: [ActivityID: [LiveActivityPush]] = [:]
    var violations: [String] = []
    var now = 1_764_000_000.0
    var retryableRate = 0.08

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    mutating func register(_ token: DeviceToken, for activity: ActivityID, sendCurrent: Bool) {
        var fanOut = fanOuts[activity] ?? FanOut(activityID: activity, configuration: .init(maxInFlight: 2, retry: RetryPolicy(maxAttempts: 1000, maxElapsed: 1e9, baseDelay: 0.05, maxDelay: 0.5)))
        let actions = fanOut.addToken(token, sendCurrent: sendCurrent, now: UnixTime(seconds: now))
        fanOuts[activity] = fanOut
        perform(actions, for: activity)
    }

    mutating func receive(_ command: ActivityCommand, offset: Int64) throws {
        try tracker.read(partition, offset: offset)
        switch coalescer.receive(command, offset: offset, recordTime: UnixTime(seconds: now), now: UnixTime(seconds: now)) {
        case .alreadyApplied, .reject:
            try tracker.complete(partition, offset: offset)
        case .scheduleFlush(let at):
            pending.append(Pending(kind: .flushTimer(command.activityID), due: at.seconds))
        case .flush(let flush):
            try publish(flush)
        }
    }

    mutating func publish(_ flush: Coalescer.Flush) throws {
        let activity = flush.push.activityID
        if let previous = flushes[activity]?.last {
            if flush.push.timestamp < previous.timestamp { violations.append("timestamp decreased for \(activity)") }
            if flush.push.version <= previous.version { violations.append("version did not grow for \(activity)") }
        }
        flushes[activity, default: []].append(flush.push)
        offsetsByVersion[activity, default: []].append((flush.push.version, flush.offsets))
        var fanOut = fanOuts[activity] ?? FanOut(activityID: activity)
        let actions = fanOut.publish(flush.push, now: UnixTime(seconds: now))
        fanOuts[activity] = fanOut
        perform(actions, for: activity)
    }

    mutating func perform(_ actions: [FanOut.Action], for activity: ActivityID) {
        for action in actions {
            switch action {
            case .send(let token, let push):
                if let last = received[token]?.last, push.version <= last.version {
                    violations.append("token \(token) sent version \(push.version) after \(last.version)")
                }
                pending.append(Pending(kind: .sendDone(activity, token, push), due: now + Double.random(in: 0.001...0.4, using: &generator)))
            case .wake(let at):
                pending.append(Pending(kind: .retryWake(activity), due: at.seconds))
            case .completed(let through):
                var entries = offsetsByVersion[activity] ?? []
                while let first = entries.first, first.version <= through {
                    entries.removeFirst()
                    for offset in first.offsets {
                        do { try tracker.complete(partition, offset: offset) } catch { violations.append("\(error)") }
                    }
                }
                offsetsByVersion[activity] = entries
            case .removeToken, .deadLetter:
                violations.append("unexpected \(action)")
            }
        }
    }

    /// Handles due work in random order; sometimes fires a timer early or twice.
    mutating func runDue() throws {
        while true {
            var candidates = pending.indices.filter { pending[$0].due <= now }
            if candidates.isEmpty, let early = pending.indices.first(where: { if case .flushTimer = pending[$0].kind { true } else { false } }),
               Double.random(in: 0..<1, using: &generator) < 0.1
            {
                candidates = [early]
            }
            guard let index = candidates.randomElement(using: &generator) else { return }
            let item = pending[index]
            // Timers may fire twice; a send completes exactly once.
            let isTimer: Bool
            switch item.kind {
            case .flushTimer, .retryWake: isTimer = true
            case .sendDone: isTimer = false
            }
            let duplicate = isTimer && Double.random(in: 0..<1, using: &generator) < 0.05
            if !duplicate || item.due > now { pending.remove(at: index) } else { pending[index].due = now + 0.3 }
            switch item.kind {
            case .flushTimer(let activity):
                switch coalescer.timerFired(for: activity, now: UnixTime(seconds: now)) {
                case .none: break
                case .reschedule(let at): pending.append(Pending(kind: .flushTimer(activity), due: at.seconds))
                case .flush(let flush): try publish(flush)
                }
            case .retryWake(let activity):
                guard var fanOut = fanOuts[activity] else { continue }
                let actions = fanOut.timerFired(now: UnixTime(seconds: now))
                fanOuts[activity] = fanOut
                perform(actions.filter { if case .wake = $0 { false } else { true } }, for: activity)
                if let next = fanOut.nextRetry { pending.append(Pending(kind: .retryWake(activity), due: next.seconds)) }
            case .sendDone(let activity, let token, let push):
                guard var fanOut = fanOuts[activity] else { continue }
                let outcome: FanOut.Outcome = Double.random(in: 0..<1, using: &generator) < retryableRate
                    ? .retryable(reason: "ServiceUnavailable", after: nil) : .delivered
                if outcome == .delivered { received[token, default: []].append(push) }
                let actions = fanOut.completed(token: token, version: push.version, outcome: outcome, now: UnixTime(seconds: now), jitter: Double.random(in: 0..<1, using: &generator))
                fanOuts[activity] = fanOut
                perform(actions, for: activity)
            }
        }
    }

    mutating func advance(by seconds: Double) throws {
        now += seconds
        try runDue()
    }

    /// Lets every timer, retry and send finish.
    mutating func drain() throws {
        var rounds = 0
        while !pending.isEmpty {
            try advance(by: 0.5)
            rounds += 1
            if rounds > 100_000 {
                violations.append("did not drain")
                return
            }
        }
    }
}

@Suite("Coalescer and FanOut, randomized")
struct CoalescerPropertyTests {
    static let activities = (0..<3).map { try! ActivityID("activity-\($0)") }

    static func randomPatch(using generator: inout SplitMix64) -> JSONValue {
        var fields: [String: JSONValue] = [:]
        for key in ["a", "b", "c", "d", "e"] where Double.random(in: 0..<1, using: &generator) < 0.4 {
            let roll = Double.random(in: 0..<1, using: &generator)
            if roll < 0.15 {
                fields[key] = .null
            } else if roll < 0.3 {
                fields[key] = ["x": .integer(Int64.random(in: 0...9, using: &generator)), "y": Double.random(in: 0..<1, using: &generator) < 0.5 ? .null : "y"]
            } else {
                fields[key] = .integer(Int64.random(in: -100...100, using: &generator))
            }
        }
        return .object(fields)
    }

    @Test("10,000 random sequences: final state is the sequential merge, timestamps never decrease, no token goes back, every offset completes")
    func randomSequences() throws {
        var failures = 0
        for seed in 0..<10_000 as Range<UInt64> {
            var simulation = DispatchSimulation(seed: seed)
            var generator = SplitMix64(seed: seed &* 31 &+ 17)
            let activityCount = Int.random(in: 1...3, using: &generator)
            let activities = Array(Self.activities.prefix(activityCount))
            var tokens: [ActivityID: [DeviceToken]] = [:]
            var tokenNumber = 0
            for activity in activities {
                for _ in 0..<Int.random(in: 0...3, using: &generator) {
                    tokenNumber += 1
                    let token = try DeviceToken(bytes: [UInt8(tokenNumber)])
                    tokens[activity, default: []].append(token)
                    simulation.register(token, for: activity, sendCurrent: false)
                }
            }
            var expected: [ActivityID: JSONValue] = [:]
            var ended: Set<ActivityID> = []
            var lastEventTime: [ActivityID: Double] = [:]
            let commandCount = Int.random(in: 1...40, using: &generator)
            for offset in 0..<Int64(commandCount) {
                let activity = activities.randomElement(using: &generator)!
                let patch = Self.randomPatch(using: &generator)
                let roll = Double.random(in: 0..<1, using: &generator)
                let event: ActivityEvent = roll < 0.04 ? .end : .update
                let replace = event == .update && Double.random(in: 0..<1, using: &generator) < 0.05
                let eventTime = simulation.now - Double.random(in: 0...5, using: &generator)
                var command = ActivityCommand(activityID: activity, event: event, contentState: patch, replaceState: replace, timestamp: UnixTime(seconds: eventTime))
                if Double.random(in: 0..<1, using: &generator) < 0.1 { command.alert = ActivityAlert(title: "t", body: "\(offset)") }
                // An end for an activity that has no state yet is refused: nothing changes.
                if !ended.contains(activity), event == .update || expected[activity] != nil {
                    let current = expected[activity] ?? .object([:])
                    expected[activity] = replace ? patch : current.applyingMergePatch(patch)
                    if event == .end { ended.insert(activity) }
                    lastEventTime[activity] = max(lastEventTime[activity] ?? eventTime, eventTime)
                }
                try simulation.receive(command, offset: offset)
                if Double.random(in: 0..<1, using: &generator) < 0.1, let activity = activities.randomElement(using: &generator) {
                    tokenNumber += 1
                    let token = try DeviceToken(bytes: [UInt8(tokenNumber % 256), 0xFF])
                    tokens[activity, default: []].append(token)
                    simulation.register(token, for: activity, sendCurrent: true)
                }
                let gap = Double.random(in: 0..<1, using: &generator) < 0.6
                    ? Double.random(in: 0...0.02, using: &generator) : Double.random(in: 0...0.6, using: &generator)
                try simulation.advance(by: gap)
            }
            try simulation.drain()

            var problems = simulation.violations
            for activity in activities {
                guard let want = expected[activity] else { continue }
                let state = simulation.coalescer.state(of: activity)?.contentState
                if state != want { problems.append("state of \(activity) is \(state?.description ?? "nil"), expected \(want)") }
                guard let lastPush = simulation.flushes[activity]?.last else {
                    problems.append("no push for \(activity)")
                    continue
                }
                if lastPush.contentState != want { problems.append("last push of \(activity) is not the final state") }
                if let latest = lastEventTime[activity], lastPush.timestamp.seconds < latest {
                    problems.append("last timestamp of \(activity) is below the newest event time")
                }
                for token in tokens[activity] ?? [] where simulation.received[token]?.last?.contentState != want {
                    problems.append("token \(token) of \(activity) does not hold the final state")
                }
            }
            if simulation.tracker.committable(simulation.partition) != Int64(commandCount) || simulation.tracker.outstanding != 0 {
                problems.append("commit position \(String(describing: simulation.tracker.committable(simulation.partition))), expected \(commandCount)")
            }
            if !problems.isEmpty {
                failures += 1
                if failures <= 5 { Issue.record("seed \(seed): \(problems.joined(separator: "; "))") }
            }
        }
        #expect(failures == 0)
    }

    @Test("a burst inside one window gives each token exactly one push, with the final state")
    func bursts() throws {
        for seed in 0..<2_000 as Range<UInt64> {
            var simulation = DispatchSimulation(seed: seed)
            simulation.retryableRate = 0
            var generator = SplitMix64(seed: seed ^ 0xABCDEF)
            let activity = Self.activities[0]
            let tokens = try (0..<Int.random(in: 1...5, using: &generator)).map { try DeviceToken(bytes: [UInt8($0 + 1)]) }
            for token in tokens { simulation.register(token, for: activity, sendCurrent: false) }
            var state = JSONValue.object([:])
            let count = Int.random(in: 1...200, using: &generator)
            let span = 0.25 * Double.random(in: 0..<1, using: &generator)
            for offset in 0..<count {
                let patch = Self.randomPatch(using: &generator)
                state = state.applyingMergePatch(patch)
                try simulation.receive(ActivityCommand(activityID: activity, contentState: patch), offset: Int64(offset))
                simulation.now += span / Double(count)
                // Timers fire only once due (late firing is fine); early firings are tested above.
                var due = simulation.pending.filter { $0.due <= simulation.now }
                due.shuffle(using: &generator)
                #expect(due.isEmpty, "no flush is due inside the window")
            }
            try simulation.drain()
            #expect(simulation.flushes[activity]?.count == 1)
            for token in tokens {
                #expect(simulation.received[token]?.count == 1, "seed \(seed): token \(token) got \(simulation.received[token]?.count ?? 0) pushes")
                #expect(simulation.received[token]?.first?.contentState == state)
            }
        }
    }
}
