@testable import LiveDispatchCore
import Testing

/// Drives the real ``PartitionDispatcher`` over random sequences of commands,
/// token registrations, send outcomes (delivered or retryable, completing in
/// random order), Kafka acknowledgements (in random order, late) and timer
/// firings (on time, late, early and twice), and records what every token
/// received and which offsets were committed.
struct DispatcherSimulation {
    enum Pending {
        case sendDone(PartitionDispatcher.Send)
        case acknowledge(UInt64)
    }

    var generator: SplitMix64
    var machine: PartitionDispatcher
    var pending: [(due: Double, item: Pending)] = []
    var received: [DeviceToken: [LiveActivityPush]] = [:]
    var inFlight: Set<DeviceToken> = []
    var published: [ActivityID: [LiveActivityPush]] = [:]
    var commits: [InternalTopic: Int64] = [:]
    var violations: [String] = []
    var now = 1_764_000_000.0
    var retryableRate = 0.08
    var commandOffset: Int64 = 0
    var tokenOffset: Int64 = 0

    static let configuration = PartitionDispatcher.Configuration(
        coalescer: .init(window: 0.25, maxDelay: 1.0),
        fanOut: .init(maxInFlight: 2, retry: RetryPolicy(maxAttempts: 1000, maxElapsed: 1e9, baseDelay: 0.05, maxDelay: 0.5)),
        sweepInterval: 5, maxInFlight: 3)

    init(seed: UInt64, restoredTokens: [(ActivityID, DeviceToken)]) {
        generator = SplitMix64(seed: seed)
        machine = PartitionDispatcher(partition: 0, configuration: Self.configuration)
        for (activity, token) in restoredTokens {
            let registration = TokenRegistration(activityID: activity, token: token)
            machine.restoreToken(key: registration.storeKey, value: registration.json.serialized())
        }
        perform(machine.finishRestore(now: time))
    }

    var time: UnixTime { UnixTime(seconds: now) }

    /// A 32-byte token, as Apple's are today.
    static func token(_ number: Int) throws -> DeviceToken {
        try DeviceToken(bytes: Array(repeating: 0xA0, count: 30) + [UInt8(number >> 8 & 0xFF), UInt8(number & 0xFF)])
    }

    mutating func command(_ command: ActivityCommand) {
        let record = PartitionDispatcher.Record(
            offset: commandOffset, key: Array(command.activityID.rawValue.utf8), value: command.json.serialized(), timestamp: time)
        commandOffset += 1
        perform(machine.command(record, now: time))
    }

    mutating func register(_ token: DeviceToken, for activity: ActivityID) {
        let registration = TokenRegistration(activityID: activity, token: token)
        let record = PartitionDispatcher.Record(
            offset: tokenOffset, key: Array(activity.rawValue.utf8), value: registration.json.serialized(), timestamp: time)
        tokenOffset += 1
        perform(machine.tokenRecord(record, now: time))
    }

    mutating func perform(_ actions: [PartitionDispatcher.Action]) {
        for action in actions {
            switch action {
            case .send(let send):
                if inFlight.contains(send.token) { violations.append("two sends in flight to \(send.token)") }
                inFlight.insert(send.token)
                if inFlight.count > Self.configuration.maxInFlight {
                    violations.append("\(inFlight.count) sends in flight in a partition limited to \(Self.configuration.maxInFlight)")
                }
                if let last = received[send.token]?.last, send.push.version <= last.version {
                    violations.append("token \(send.token) sent version \(send.push.version) after it received \(last.version)")
                }
                // Byte for byte: a payload reused from the coalescer's size check is the push's own.
                if send.payload != APNsPayload.bytes(for: send.push) {
                    violations.append("the payload of version \(send.push.version) is not its push: \(String(decoding: send.payload, as: UTF8.self)) vs \(String(decoding: APNsPayload.bytes(for: send.push), as: UTF8.self))")
                }
                let activity = send.activityID
                if published[activity]?.last?.version != send.push.version, published[activity]?.contains(where: { $0.version == send.push.version }) != true {
                    if let previous = published[activity]?.last, send.push.timestamp < previous.timestamp {
                        violations.append("timestamp of \(activity) decreased")
                    }
                    published[activity, default: []].append(send.push)
                }
                pending.append((now + Double.random(in: 0.001...0.4, using: &generator), .sendDone(send)))
            case .produce(let produce):
                pending.append((now + Double.random(in: 0...0.3, using: &generator), .acknowledge(produce.ticket)))
            case .commit(let topic, let offset):
                if let previous = commits[topic], offset < previous { violations.append("commit of \(topic) moved back") }
                commits[topic] = offset
            case .observe(let observation):
                if case .deadLettered(let letter) = observation, letter.reason != .activityEnded {
                    violations.append("unexpected dead letter \(letter.reason)")
                }
            case .channel(let request):
                violations.append("unexpected channel request \(request)")
            }
        }
        if machine.sendsInFlight != inFlight.count {
            violations.append("the machine counts \(machine.sendsInFlight) sends in flight, not \(inFlight.count)")
        }
    }

    /// Runs due work in random order; fires the timer when due, and now and
    /// then early or twice.
    mutating func runDue() {
        while true {
            if let deadline = machine.nextDeadline, deadline.seconds <= now {
                perform(machine.timerFired(now: time))
                if Double.random(in: 0..<1, using: &generator) < 0.05 { perform(machine.timerFired(now: time)) }
                continue
            }
            if Double.random(in: 0..<1, using: &generator) < 0.02 { perform(machine.timerFired(now: time)) }
            let due = pending.indices.filter { pending[$0].due <= now }
            guard let index = due.randomElement(using: &generator) else { return }
            let item = pending.remove(at: index).item
            switch item {
            case .acknowledge(let ticket):
                perform(machine.acknowledged(ticket, now: time))
            case .sendDone(let send):
                inFlight.remove(send.token)
                let outcome: FanOut.Outcome = Double.random(in: 0..<1, using: &generator) < retryableRate
                    ? .retryable(reason: "ServiceUnavailable", after: nil) : .delivered
                if outcome == .delivered { received[send.token, default: []].append(send.push) }
                perform(machine.sendCompleted(send, outcome: outcome, now: time, jitter: Double.random(in: 0..<1, using: &generator)))
            }
        }
    }

    mutating func advance(by seconds: Double) {
        now += seconds
        runDue()
    }

    /// Lets every timer, retry, send and acknowledgement finish.
    mutating func drain() {
        var rounds = 0
        while !pending.isEmpty || !machine.isIdle {
            advance(by: 0.5)
            rounds += 1
            if rounds > 100_000 {
                violations.append("did not drain")
                return
            }
        }
    }
}

@Suite("PartitionDispatcher, randomized")
struct PartitionDispatcherPropertyTests {
    static let activities = (0..<3).compactMap { try? ActivityID("activity-\($0)") }

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

    @Test("5,000 random sequences: final state is the sequential merge on every token, never older after newer, timestamps never decrease, every offset commits")
    func randomSequences() throws {
        var failures = 0
        for seed in 0..<5_000 as Range<UInt64> {
            var generator = SplitMix64(seed: seed &* 31 &+ 17)
            let activities = Array(Self.activities.prefix(Int.random(in: 1...3, using: &generator)))
            var tokens: [ActivityID: [DeviceToken]] = [:]
            var tokenNumber = 0
            var restored: [(ActivityID, DeviceToken)] = []
            for activity in activities {
                for _ in 0..<Int.random(in: 0...3, using: &generator) {
                    tokenNumber += 1
                    tokens[activity, default: []].append(try DispatcherSimulation.token(tokenNumber))
                    restored.append((activity, try DispatcherSimulation.token(tokenNumber)))
                }
            }
            var simulation = DispatcherSimulation(seed: seed, restoredTokens: restored)
            var expected: [ActivityID: JSONValue] = [:]
            var ended: Set<ActivityID> = []
            var lastEventTime: [ActivityID: Double] = [:]
            let commandCount = Int.random(in: 1...40, using: &generator)
            for offset in 0..<commandCount {
                guard let activity = activities.randomElement(using: &generator) else { continue }
                let patch = Self.randomPatch(using: &generator)
                // An end for an activity with no state yet is refused (nothing to end): ends go to activities that have one.
                let event: ActivityEvent = Double.random(in: 0..<1, using: &generator) < 0.04 && expected[activity] != nil ? .end : .update
                let replace = event == .update && Double.random(in: 0..<1, using: &generator) < 0.05
                let eventTime = simulation.now - Double.random(in: 0...5, using: &generator)
                var command = ActivityCommand(activityID: activity, event: event, contentState: patch, replaceState: replace, timestamp: UnixTime(seconds: eventTime))
                if Double.random(in: 0..<1, using: &generator) < 0.1 { command.alert = ActivityAlert(title: "t", body: .text("\(offset)")) }
                if !ended.contains(activity) {
                    let current = expected[activity] ?? .object([:])
                    expected[activity] = replace ? patch : current.applyingMergePatch(patch)
                    if event == .end { ended.insert(activity) }
                    lastEventTime[activity] = max(lastEventTime[activity] ?? eventTime, eventTime)
                }
                simulation.command(command)
                if Double.random(in: 0..<1, using: &generator) < 0.1, let activity = activities.randomElement(using: &generator) {
                    tokenNumber += 1
                    let token = try DispatcherSimulation.token(tokenNumber)
                    tokens[activity, default: []].append(token)
                    simulation.register(token, for: activity)
                }
                let gap = Double.random(in: 0..<1, using: &generator) < 0.6
                    ? Double.random(in: 0...0.02, using: &generator) : Double.random(in: 0...0.6, using: &generator)
                simulation.advance(by: gap)
            }
            simulation.drain()

            var problems = simulation.violations
            for activity in activities {
                guard let want = expected[activity] else { continue }
                let state = simulation.machine.state(of: activity)?.contentState
                if state != want { problems.append("state of \(activity) is \(state?.description ?? "nil"), expected \(want)") }
                for token in tokens[activity] ?? [] {
                    guard let last = simulation.received[token]?.last else {
                        problems.append("token \(token) of \(activity) received nothing")
                        continue
                    }
                    if last.contentState != want { problems.append("token \(token) of \(activity) does not hold the final state") }
                    if let latest = lastEventTime[activity], last.timestamp.seconds < latest {
                        problems.append("the last timestamp of \(activity) is below its newest event time")
                    }
                }
            }
            if simulation.commits[.commands] != Int64(commandCount) {
                problems.append("commands committed through \(String(describing: simulation.commits[.commands])), expected \(commandCount)")
            }
            if simulation.tokenOffset > 0, simulation.commits[.tokens] != simulation.tokenOffset {
                problems.append("tokens committed through \(String(describing: simulation.commits[.tokens])), expected \(simulation.tokenOffset)")
            }
            if simulation.machine.outstanding != 0 { problems.append("\(simulation.machine.outstanding) records still outstanding") }
            if !problems.isEmpty {
                failures += 1
                if failures <= 5 { Issue.record("seed \(seed): \(problems.joined(separator: "; "))") }
            }
        }
        #expect(failures == 0)
    }

    @Test("a burst inside one window gives each token exactly one push, with the final state")
    func bursts() throws {
        for seed in 0..<1_000 as Range<UInt64> {
            var generator = SplitMix64(seed: seed ^ 0xABCDEF)
            guard let activity = Self.activities.first else { return }
            let tokens = try (0..<Int.random(in: 1...5, using: &generator)).map { try DispatcherSimulation.token($0 + 1) }
            var simulation = DispatcherSimulation(seed: seed, restoredTokens: tokens.map { (activity, $0) })
            simulation.retryableRate = 0
            var state = JSONValue.object([:])
            let count = Int.random(in: 1...200, using: &generator)
            let span = 0.25 * Double.random(in: 0..<1, using: &generator)
            for _ in 0..<count {
                let patch = Self.randomPatch(using: &generator)
                state = state.applyingMergePatch(patch)
                simulation.command(ActivityCommand(activityID: activity, contentState: patch))
                simulation.now += span / Double(count)
                #expect(simulation.pending.isEmpty, "nothing is sent inside the window")
            }
            simulation.drain()
            #expect(simulation.published[activity]?.count == 1)
            for token in tokens {
                #expect(simulation.received[token]?.count == 1, "seed \(seed): token \(token) got \(simulation.received[token]?.count ?? 0) pushes")
                #expect(simulation.received[token]?.first?.contentState == state)
            }
        }
    }
}
