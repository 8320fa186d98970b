import Foundation
@testable import LiveDispatchCore
import Testing

/// Drives the real ``PartitionDispatcher`` (its ``ActivityLifecycle``, fan-outs
/// and sweep) through random lives: commands (starts, updates, ends with past,
/// present and future dismissal dates, late updates after the end),
/// registrations and unregistrations, APNs answers (delivered, 500, 429 with
/// `retry-after`, 410, 400), acknowledgements in random order, timer firings,
/// and restarts: a new machine restored from what the old one wrote to the
/// `state` and `token-store` changelogs, replaying the commands and
/// registrations after the committed offsets, with its sends in flight lost.
/// The devices keep what they received across restarts.
struct LifecycleSimulation {
    enum Pending {
        case sendDone(PartitionDispatcher.Send, generation: Int)
        case acknowledge(UInt64, generation: Int)
    }

    static let maxAge = 3_600.0
    static let configuration = PartitionDispatcher.Configuration(
        coalescer: .init(window: 0.25, maxDelay: 1.0, maxAge: maxAge, endedRetention: 20),
        fanOut: .init(maxInFlight: 3, retry: RetryPolicy(maxAttempts: 4, maxElapsed: 20, baseDelay: 0.1, maxDelay: 2)),
        sweepInterval: 1, maxInFlight: 4)

    var generator: SplitMix64
    var machine = PartitionDispatcher(partition: 0, configuration: configuration)
    /// Which machine a pending item belongs to: a restart loses the old one's.
    var generation = 0
    var pending: [(due: Double, item: Pending)] = []
    var now = 1_764_000_000.0
    var time: UnixTime { UnixTime(seconds: now) }

    // Kafka: the input logs, the compacted changelogs, the committed offsets.
    var commandLog: [PartitionDispatcher.Record] = []
    var tokenLog: [PartitionDispatcher.Record] = []
    var stateLog: [String: [UInt8]] = [:]
    var tokenStoreLog: [[UInt8]: [UInt8]] = [:]
    var committed: [InternalTopic: Int64] = [:]

    // What devices and backends saw.
    var received: [DeviceToken: [LiveActivityPush]] = [:]
    var endReceived: Set<DeviceToken> = []
    var deadLettered: [DeviceToken: [DeadLetter]] = [:]
    var failedOutcomes: Set<DeviceToken> = []
    var removed: Set<DeviceToken> = []
    var unregistered: Set<DeviceToken> = []
    var registeredTo: [DeviceToken: ActivityID] = [:]
    /// When each activity's end was first applied, and when it was dismissed.
    var endedAt: [ActivityID: Double] = [:]
    var dismissedAt: [ActivityID: Double] = [:]
    var registeredAfterDismissal: Set<DeviceToken> = []
    var started: Set<ActivityID> = []
    var violations: [String] = []
    var nextToken = 0
    /// What happened, for the message of a failing seed.
    var log: [String] = []

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
        perform(machine.finishRestore(now: time))
    }

    func token(_ number: Int) -> DeviceToken {
        (try? DeviceToken(bytes: Array(repeating: 0xC0, count: 30) + [UInt8(number >> 8 & 0xFF), UInt8(number & 0xFF)]))
            ?? DeviceToken(unchecked: [0])
    }

    mutating func roll() -> Double { Double.random(in: 0..<1, using: &generator) }

    // MARK: Inputs

    mutating func command(_ json: String, activity: ActivityID) {
        let record = PartitionDispatcher.Record(
            offset: Int64(commandLog.count), key: Array(activity.rawValue.utf8), value: Array(json.utf8), timestamp: time)
        commandLog.append(record)
        log.append("\(now) command \(record.offset) \(json)")
        perform(machine.command(record, now: time))
        checkNotRecreated(activity)
    }

    mutating func randomCommand(for activity: ActivityID) {
        let score = Int.random(in: 0...9, using: &generator)
        let id = activity.rawValue
        if !started.contains(activity) {
            started.insert(activity)
            if roll() < 0.5 {
                command(
                    #"{"activity_id": "\#(id)", "event": "start", "content_state": {"score": \#(score)}, "attributes_type": "Match", "attributes": {"home": "Owls"}, "alert": {"title": "Kick-off", "body": "0-0"}}"#,
                    activity: activity)
                return
            }
        }
        let kind = roll()
        if kind < 0.12 {
            // An end, dismissed in the past, now, or later.
            let dismissal = [now - 30, now, now + 5, now + 40].randomElement(using: &generator) ?? now
            let date = roll() < 0.3 ? "" : #", "dismissal_date": \#(Int64(dismissal))"#
            command(#"{"activity_id": "\#(id)", "event": "end", "content_state": {"score": \#(score)}\#(date)}"#, activity: activity)
        } else if kind < 0.17 {
            // An update whose dismissal date has passed ends the activity.
            command(#"{"activity_id": "\#(id)", "content_state": {"score": \#(score)}, "dismissal_date": \#(Int64(now - 1))}"#, activity: activity)
        } else {
            let dismissal = roll() < 0.1 ? #", "dismissal_date": \#(Int64(now + 30))"# : ""
            command(#"{"activity_id": "\#(id)", "content_state": {"score": \#(score)}\#(dismissal)}"#, activity: activity)
        }
        if machine.state(of: activity)?.endedAt != nil, endedAt[activity] == nil { endedAt[activity] = now }
    }

    mutating func register(_ token: DeviceToken, to activity: ActivityID, action: String = "register") {
        let json = #"{"activity_id": "\#(activity.rawValue)", "token": "\#(token.hex)", "action": "\#(action)"}"#
        let record = PartitionDispatcher.Record(
            offset: Int64(tokenLog.count), key: Array(activity.rawValue.utf8), value: Array(json.utf8), timestamp: time)
        tokenLog.append(record)
        log.append("\(now) \(action) \(token.hex.suffix(4)) to \(activity)")
        if action == "register" {
            registeredTo[token] = activity
            if dismissedAt[activity] != nil { registeredAfterDismissal.insert(token) }
        } else {
            unregistered.insert(token)
        }
        perform(machine.tokenRecord(record, now: time))
    }

    mutating func newToken(for activity: ActivityID) {
        let token = token(nextToken)
        nextToken += 1
        register(token, to: activity)
    }

    // MARK: The service around the machine

    mutating func perform(_ actions: [PartitionDispatcher.Action]) {
        for action in actions {
            switch action {
            case .send(let send):
                log.append("\(now) send \(send.push.event) v\(send.push.version) of \(send.activityID) to \(send.token.hex.suffix(4))")
                check(send)
                pending.append((now + Double.random(in: 0.001...0.3, using: &generator), .sendDone(send, generation: generation)))
            case .produce(let produce):
                switch produce.topic {
                case .state: stateLog[produce.key] = produce.value
                case .tokenStore: tokenStoreLog[Array(produce.key.utf8)] = produce.value
                case .deadLetters:
                    if let value = produce.value, let letter = try? DeadLetter(json: JSONValue.parse(value)), let token = letter.token {
                        deadLettered[token, default: []].append(letter)
                    }
                case .commands, .tokens, .starts, .channels, .outcomes: break
                }
                if let value = produce.value, produce.topic == .tokenStore,
                   let registration = try? TokenRegistration(bytes: value), registration.lastOutcome?.result == .failed
                {
                    failedOutcomes.insert(registration.token)
                }
                pending.append((now + Double.random(in: 0...0.2, using: &generator), .acknowledge(produce.ticket, generation: generation)))
            case .commit(let topic, let offset):
                committed[topic] = max(committed[topic] ?? 0, offset)
            case .observe(let observation):
                switch observation {
                case .activityExpired(let activity, let reason):
                    log.append("\(now) \(activity) expired: \(reason)")
                    if reason == "dismissed" { dismissedAt[activity] = now }
                case .tokenRemoved(_, let token, _): removed.insert(token)
                default: break
                }
            case .channel(let request):
                violations.append("unexpected channel request \(request)")
            }
        }
    }

    mutating func check(_ send: PartitionDispatcher.Send) {
        if send.push.event == .start { violations.append("a start was sent to update token \(send.token.hex)") }
        if endReceived.contains(send.token), send.push.event != .end {
            violations.append("token \(send.token.hex) was sent \(send.push.event) version \(send.push.version) after its end")
        }
        if registeredAfterDismissal.contains(send.token) {
            violations.append("token \(send.token.hex), registered after its activity was dismissed, was sent \(send.push.event)")
        }
    }

    mutating func checkNotRecreated(_ activity: ActivityID) {
        guard let ended = endedAt[activity], now < ended + Self.maxAge, let state = machine.state(of: activity), state.endedAt == nil else { return }
        violations.append("activity \(activity) came back live \(now - ended) s after its end (version \(state.version))")
    }

    mutating func answer(_ send: PartitionDispatcher.Send) -> FanOut.Outcome {
        let roll = roll()
        if roll < 0.55 { return .delivered }
        if roll < 0.75 { return .retryable(reason: "InternalServerError", after: nil) }
        if roll < 0.88 { return .retryable(reason: "TooManyRequests", after: Double.random(in: 0...1, using: &generator)) }
        if roll < 0.93 { return .tokenInvalid(reason: "Unregistered") }
        return .permanent(reason: "BadExpirationDate")
    }

    /// What the device does with a push APNs delivered, as ActivityKit
    /// does: one older than what it shows (by `aps.timestamp`) is ignored,
    /// and an ended activity takes nothing but its end. Pushes of two
    /// owners (before and after a restart) may arrive in either order.
    mutating func deliver(_ send: PartitionDispatcher.Send) {
        let token = send.token
        if let shown = received[token]?.last, send.push.timestamp < shown.timestamp { return }
        if endReceived.contains(token), send.push.event != .end { return }
        received[token, default: []].append(send.push)
        if send.push.event == .end { endReceived.insert(token) }
    }

    mutating func runDue() {
        while true {
            if let deadline = machine.nextDeadline, deadline.seconds <= now {
                perform(machine.timerFired(now: time))
                if roll() < 0.05 { perform(machine.timerFired(now: time)) }
                continue
            }
            let due = pending.indices.filter { pending[$0].due <= now }
            guard let index = due.randomElement(using: &generator) else { return }
            switch pending.remove(at: index).item {
            case .acknowledge(let ticket, let owner):
                guard owner == generation else { continue }
                perform(machine.acknowledged(ticket, now: time))
            case .sendDone(let send, let owner):
                let outcome = answer(send)
                if outcome == .delivered { deliver(send) }
                guard owner == generation else { continue }
                perform(machine.sendCompleted(send, outcome: outcome, now: time, jitter: roll()))
            }
        }
    }

    mutating func advance(by seconds: Double) {
        now += seconds
        runDue()
    }

    /// The worker stops at once: a new machine restores the changelogs and
    /// reads the records after the committed offsets again.
    mutating func restart() {
        log.append("\(now) restart")
        generation += 1
        pending.removeAll { item in
            if case .acknowledge = item.item { true } else { false }
        }
        machine = PartitionDispatcher(partition: 0, configuration: Self.configuration)
        for (key, value) in stateLog.sorted(by: { $0.key < $1.key }) { machine.restoreState(key: key, value: value) }
        for (key, value) in tokenStoreLog.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) { machine.restoreToken(key: key, value: value) }
        machine.holdPushes(untilCommandOffset: Int64(commandLog.count), tokenOffset: Int64(tokenLog.count))
        perform(machine.finishRestore(now: time))
        let commandsFrom = Int(committed[.commands] ?? 0), tokensFrom = Int(committed[.tokens] ?? 0)
        var commands = Array(commandLog[min(commandsFrom, commandLog.count)...])
        var tokens = Array(tokenLog[min(tokensFrom, tokenLog.count)...])
        // The two topics are read side by side, in an order of their own.
        while !commands.isEmpty || !tokens.isEmpty {
            if !commands.isEmpty, tokens.isEmpty || roll() < 0.5 {
                let record = commands.removeFirst()
                perform(machine.command(record, now: time))
            } else if !tokens.isEmpty {
                perform(machine.tokenRecord(tokens.removeFirst(), now: time))
            }
        }
    }

    /// Lets every send, retry, acknowledgement and dismissal finish.
    mutating func settle() {
        var rounds = 0
        while !pending.isEmpty || !machine.isIdle || rounds < 200 {
            advance(by: 0.5)
            rounds += 1
            if rounds > 20_000 {
                violations.append("did not settle")
                return
            }
        }
        // Past every dismissal date and retention.
        for _ in 0..<120 { advance(by: 1) }
    }

    /// Every token of an ended activity ended with the end, was removed, or
    /// has a dead letter and a failed outcome; every ended activity was dismissed.
    mutating func checkEnds() {
        for (token, activity) in registeredTo where endedAt[activity] != nil {
            guard !removed.contains(token), !unregistered.contains(token), !registeredAfterDismissal.contains(token) else { continue }
            if received[token]?.last?.event == .end { continue }
            if let letter = deadLettered[token]?.last, letter.activityID == activity, failedOutcomes.contains(token) { continue }
            violations.append(
                "token \(token.hex) of ended activity \(activity) last got \(received[token]?.last.map { "\($0.event) v\($0.version)" } ?? "nothing"), no dead letter")
        }
        for activity in endedAt.keys {
            if machine.state(of: activity) != nil { violations.append("ended activity \(activity) was never dismissed") }
            if let marker = stateLog[activity.rawValue], (try? ActivityState(bytes: marker))?.dismissedAt == nil {
                violations.append("ended activity \(activity) has no marker in state")
            }
        }
    }
}

@Suite("Activity lifecycle, randomized")
struct ActivityLifecyclePropertyTests {
    static let activities = (0..<3).compactMap { try? ActivityID("life-\($0)") }

    static func run(seed: UInt64, steps: Int) -> LifecycleSimulation {
        var simulation = LifecycleSimulation(seed: seed)
        for _ in 0..<steps {
            let activity = activities.randomElement(using: &simulation.generator) ?? activities[0]
            let roll = simulation.roll()
            if roll < 0.4 {
                simulation.randomCommand(for: activity)
            } else if roll < 0.55 {
                simulation.newToken(for: activity)
            } else if roll < 0.58, let token = simulation.registeredTo.filter({ $0.value == activity }).keys.sorted().randomElement(using: &simulation.generator) {
                simulation.register(token, to: activity, action: "unregister")
            } else if roll < 0.6 {
                simulation.restart()
            } else {
                simulation.advance(by: Double.random(in: 0...2, using: &simulation.generator))
            }
            // Late updates after every end, now and then.
            if simulation.roll() < 0.1, let ended = simulation.endedAt.keys.sorted().randomElement(using: &simulation.generator) {
                simulation.command(#"{"activity_id": "\#(ended.rawValue)", "content_state": {"late": true}}"#, activity: ended)
            }
            if simulation.violations.count > 5 { break }
        }
        // Every activity ends, then its late goal arrives.
        for activity in activities {
            simulation.started.insert(activity)
            simulation.command(#"{"activity_id": "\#(activity.rawValue)", "event": "end", "dismissal_date": \#(Int64(simulation.now))}"#, activity: activity)
            if simulation.endedAt[activity] == nil, simulation.machine.state(of: activity)?.endedAt != nil { simulation.endedAt[activity] = simulation.now }
        }
        simulation.settle()
        for activity in activities {
            simulation.command(#"{"activity_id": "\#(activity.rawValue)", "content_state": {"goal": 95}}"#, activity: activity)
        }
        simulation.settle()
        simulation.checkEnds()
        return simulation
    }

    /// `LIVEDISPATCH_LIFECYCLE_SEEDS` runs more or fewer.
    @Test("600 random lives: every token ends with the end, a removal or a dead letter; nothing after an end; no start to an update token; no ended activity comes back")
    func randomLives() {
        let seeds = UInt64(ProcessInfo.processInfo.environment["LIVEDISPATCH_LIFECYCLE_SEEDS"] ?? "") ?? 600
        for seed in UInt64(1)...max(1, seeds) {
            let simulation = Self.run(seed: seed, steps: 120)
            #expect(simulation.violations.isEmpty, "seed \(seed): \(simulation.violations.prefix(5))\n\(simulation.log.suffix(600).joined(separator: "\n"))")
            if !simulation.violations.isEmpty { return }
        }
    }
}
