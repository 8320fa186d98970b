@testable import LiveDispatchCore
import Testing

/// Plays the dispatcher service around a `PartitionDispatcher`: acknowledges
/// produces, answers sends with a chosen outcome, calls `timerFired` when
/// the clock passes the machine's `nextDeadline`, and records everything.
struct DispatcherHarness {
    var dispatcher: PartitionDispatcher
    var now = UnixTime(seconds: 1_764_000_000)
    var produced: [PartitionDispatcher.Produce] = []
    var sent: [PartitionDispatcher.Send] = []
    var commits: [InternalTopic: Int64] = [:]
    var outcome: (PartitionDispatcher.Send) -> FanOut.Outcome = { _ in .delivered }
    var holdAcks = false
    var observations: [PartitionDispatcher.Observation] = []
    var unacknowledged: [UInt64] = []
    var channelRequests: [PartitionDispatcher.ChannelRequest] = []

    init(configuration: PartitionDispatcher.Configuration = PartitionDispatcher.Configuration()) {
        dispatcher = PartitionDispatcher(partition: 2, configuration: configuration)
    }

    mutating func run(_ initial: [PartitionDispatcher.Action]) {
        var queue = initial
        while !queue.isEmpty {
            let action = queue.removeFirst()
            switch action {
            case .send(let send):
                sent.append(send)
                queue += dispatcher.sendCompleted(send, outcome: outcome(send), now: now, jitter: 0.5)
            case .produce(let produce):
                produced.append(produce)
                if holdAcks { unacknowledged.append(produce.ticket) } else { queue += dispatcher.acknowledged(produce.ticket, now: now) }
            case .commit(let topic, let offset):
                commits[topic] = offset
            case .observe(let observation):
                observations.append(observation)
            case .channel(let request):
                channelRequests.append(request)
            }
        }
    }

    mutating func releaseAcks() {
        let tickets = unacknowledged
        unacknowledged = []
        for ticket in tickets { run(dispatcher.acknowledged(ticket, now: now)) }
    }

    /// Moves the clock; fires the machine's timer as often as it is due.
    mutating func advance(by seconds: Double) {
        now = now + seconds
        var firings = 0
        while let deadline = dispatcher.nextDeadline, deadline <= now, firings < 10_000 {
            firings += 1
            run(dispatcher.timerFired(now: now))
        }
    }

    mutating func restore(states: [ActivityState] = [], tokens: [TokenRegistration] = []) {
        for state in states { dispatcher.restoreState(key: state.activityID.rawValue, value: state.json.serialized()) }
        for token in tokens { dispatcher.restoreToken(key: token.storeKey, value: token.json.serialized()) }
        run(dispatcher.finishRestore(now: now))
    }

    mutating func command(_ offset: Int64, _ json: String, key: String? = nil, trace: TraceContext? = nil) {
        let value = Array(json.utf8)
        let activity = (try? ActivityCommand(bytes: value))?.activityID.rawValue
        run(dispatcher.command(.init(offset: offset, key: Array((key ?? activity ?? "").utf8), value: value, timestamp: now, trace: trace), now: now))
    }

    mutating func token(_ offset: Int64, _ json: String) {
        let value = Array(json.utf8)
        let key = (try? TokenRecord(bytes: value))?.key ?? ""
        run(dispatcher.tokenRecord(.init(offset: offset, key: Array(key.utf8), value: value, timestamp: now), now: now))
    }

    /// Feeds a record of `starts` as Kafka would deliver it (key: its audience).
    mutating func audienceStart(_ offset: Int64, _ value: [UInt8]) {
        let key = (try? AudienceStart(bytes: value))?.audience.rawValue ?? ""
        run(dispatcher.audienceStartRecord(.init(offset: offset, key: Array(key.utf8), value: value, timestamp: now), now: now))
    }

    func produced(on topic: InternalTopic) -> [PartitionDispatcher.Produce] { produced.filter { $0.topic == topic } }

    func deadLetters() throws -> [DeadLetter] {
        try produced(on: .deadLetters).map { try DeadLetter(json: JSONValue.parse($0.value ?? [])) }
    }
}

@Suite("PartitionDispatcher")
struct PartitionDispatcherTests {
    let match = try! ActivityID("match-42")
    // Registrations need a full-size token: 32 bytes, as Apple's are.
    let tokenA = try! DeviceToken(hex: String(repeating: "aa01", count: 16))
    let tokenB = try! DeviceToken(hex: String(repeating: "bb02", count: 16))

    /// An activity that exists, with no push yet: `end` needs one.
    func started(_ harness: DispatcherHarness) -> ActivityState {
        ActivityState(activityID: match, createdAt: harness.now)
    }

    func registered(_ token: DeviceToken, environment: APNsEnvironment = .production) -> TokenRegistration {
        TokenRegistration(activityID: match, token: token, environment: environment)
    }

    @Test("a command reaches every token with the full state; the snapshot is written, then the offset committed")
    func commandToPushes() throws {
        var harness = DispatcherHarness()
        harness.restore(tokens: [registered(tokenA), registered(tokenB, environment: .sandbox)])
        harness.command(0, #"{"id": "c-1", "activity_id": "match-42", "content_state": {"teamOneScore": 1, "teamTwoScore": 0}}"#)
        #expect(harness.sent.isEmpty, "held for the coalescing window")
        harness.command(1, #"{"id": "c-2", "activity_id": "match-42", "content_state": {"teamOneScore": 2}}"#)
        harness.advance(by: 0.3)
        #expect(harness.sent.map(\.token) .sorted() == [tokenA, tokenB])
        #expect(harness.sent.first { $0.token == tokenB }?.environment == .sandbox)
        let payload = try JSONValue.parse(harness.sent[0].payload)
        #expect(payload["aps"]?["content-state"] == ["teamOneScore": 2, "teamTwoScore": 0])
        let snapshots = harness.produced(on: .state)
        #expect(snapshots.count == 1)
        #expect(snapshots[0].partition == 2)
        let snapshot = try ActivityState(bytes: snapshots[0].value ?? [])
        #expect(snapshot.contentState == ["teamOneScore": 2, "teamTwoScore": 0])
        #expect(snapshot.lastOffset == 1)
        #expect(harness.commits[.commands] == 2)
        #expect(harness.dispatcher.isIdle)
        // No type declared: each command is counted as sent unchecked. The
        // outcome names the commands the push carried and how its sends ended.
        let outcome = PushOutcome(
            activityID: match, app: nil,
            summary: PushSummary(version: 1, event: .update, completedAt: harness.now, commands: 2, delivered: 2),
            tokens: 2, commandIDs: ["c-1", "c-2"])
        #expect(harness.observations == [
            .uncheckedCommand(match, .untyped), .uncheckedCommand(match, .untyped),
            .pushCompleted(snapshot, commands: 2, tokens: 2, sample: [tokenA, tokenB], outcome: outcome),
        ])
        #expect(Outcome.of(harness.observations[2], now: harness.now)?.json == [
            "id": "push:match-42:1", "kind": "push", "activity_id": "match-42", "version": 1, "event": "update",
            "at": .double(harness.now.seconds), "delivered": 2, "failed": [:], "tokens": 2, "commands": 2, "command_ids": ["c-1", "c-2"],
        ])
    }

    @Test("offsets are not committed before Kafka acknowledges the snapshot")
    func commitWaitsForAck() {
        var harness = DispatcherHarness()
        harness.holdAcks = true
        harness.restore(states: [started(harness)], tokens: [registered(tokenA)])
        harness.command(0, #"{"activity_id": "match-42", "event": "end", "content_state": {"final": true}}"#)
        #expect(harness.sent.count == 1)
        #expect(harness.produced(on: .state).count == 1)
        #expect(harness.commits[.commands] == nil)
        #expect(harness.dispatcher.outstanding == 1)
        harness.releaseAcks()
        #expect(harness.commits[.commands] == 1)
        #expect(harness.dispatcher.outstanding == 0)
    }

    @Test("a registration is stored, committed after the ack, and the new token is sent the current state")
    func registration() throws {
        var harness = DispatcherHarness()
        harness.restore(states: [ActivityState(activityID: match, contentState: ["teamOneScore": 3], version: 4, timestamp: harness.now, createdAt: harness.now, lastOffset: 9)], tokens: [registered(tokenA)])
        harness.token(0, #"{"activity_id": "match-42", "token": "\#(tokenB.hex.uppercased())", "environment": "sandbox"}"#)
        #expect(harness.sent.map(\.token) == [tokenB], "only the new token: the restored one already has version 4")
        #expect(try JSONValue.parse(harness.sent[0].payload)["aps"]?["content-state"] == ["teamOneScore": 3])
        let stored = harness.produced(on: .tokenStore)
        #expect(stored.map(\.key) == ["match-42\u{1F}\(tokenB.hex)"])
        let registration = try TokenRegistration(bytes: stored[0].value ?? [])
        #expect(registration.registeredAt == harness.now)
        #expect(harness.commits[.tokens] == 1)
        harness.token(1, #"{"activity_id": "match-42", "token": "\#(tokenA.hex)", "action": "unregister"}"#)
        #expect(harness.produced(on: .tokenStore).last?.value == nil, "unregister writes a tombstone")
        #expect(harness.dispatcher.tokens(of: match) == [tokenB])
    }

    @Test("bad records are dead-lettered with the reason and the original, and committed after")
    func badRecords() throws {
        var harness = DispatcherHarness()
        harness.restore()
        harness.command(0, "{not json")
        harness.command(1, #"{"activity_id": "match-42", "event": "pause"}"#)
        harness.command(2, #"{"activity_id": "match-42"}"#, key: "match-43")
        harness.token(0, #"{"activity_id": "match-42", "token": "xyz"}"#)
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.invalidJSON, .invalidCommand, .invalidCommand, .invalidCommand])
        #expect(letters[0].origin == DeadLetter.Origin(topic: "livedispatch.commands", partition: 2, offset: 0, key: "", value: "{not json"))
        #expect(letters[1].message.contains("field 'event'"))
        #expect(letters[2].message.contains("record key \"match-43\" is not the activity_id \"match-42\""))
        #expect(letters[3].message.contains("field 'token'"))
        #expect(harness.commits[.commands] == 3)
        #expect(harness.commits[.tokens] == 1)
    }

    @Test("after end, updates are dead-lettered with activity-ended")
    func activityEnded() throws {
        var harness = DispatcherHarness()
        harness.restore(states: [started(harness)], tokens: [registered(tokenA)])
        harness.command(0, #"{"activity_id": "match-42", "event": "end", "content_state": {"teamOneScore": 3}, "dismissal_date": 1764000900}"#)
        let end = try JSONValue.parse(harness.sent[0].payload)
        #expect(end["aps"]?["event"] == "end")
        #expect(end["aps"]?["dismissal-date"] == 1_764_000_900)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"teamOneScore": 4}}"#)
        #expect(try harness.deadLetters().map(\.reason) == [.activityEnded])
        #expect(harness.sent.count == 1)
        #expect(harness.commits[.commands] == 2)
    }

    @Test("a token answered 410 is removed, tombstoned and never pushed again")
    func unregisteredToken() throws {
        var harness = DispatcherHarness()
        harness.outcome = { send in send.token == self.tokenA ? .tokenInvalid(reason: "Unregistered") : .delivered }
        harness.restore(tokens: [registered(tokenA), registered(tokenB)])
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"n": 1}}"#)
        harness.advance(by: 1)
        #expect(harness.produced(on: .tokenStore).map(\.key) == ["match-42\u{1F}\(tokenA.hex)"])
        #expect(harness.produced(on: .tokenStore).first?.value == nil)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"n": 2}}"#)
        harness.advance(by: 1)
        #expect(harness.sent.filter { $0.token == tokenA }.count == 1)
        #expect(harness.sent.filter { $0.token == tokenB }.count == 2)
        #expect(harness.commits[.commands] == 2)
    }

    @Test("retryable failures retry after a backoff; exhausted ones are dead-lettered and still complete")
    func retries() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.fanOut.retry.maxAttempts = 3
        var harness = DispatcherHarness(configuration: configuration)
        harness.outcome = { _ in .retryable(reason: "ServiceUnavailable", after: nil) }
        harness.restore(states: [started(harness)], tokens: [registered(tokenA)])
        harness.command(0, #"{"activity_id": "match-42", "event": "end"}"#)
        for _ in 0..<10 { harness.advance(by: 1) }
        #expect(harness.sent.count == 3)
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.retriesExhausted])
        #expect(letters[0].token == tokenA)
        #expect(letters[0].details["attempts"] == 3)
        #expect(harness.commits[.commands] == 1)
    }

    @Test("a payload over 4096 bytes is dead-lettered with its size, and its offset still completes")
    func payloadTooLarge() throws {
        var harness = DispatcherHarness()
        harness.restore(states: [started(harness)], tokens: [registered(tokenA)])
        let big = String(repeating: "x", count: 4100)
        harness.command(0, #"{"activity_id": "match-42", "event": "end", "content_state": {"note": "\#(big)"}}"#)
        #expect(harness.sent.isEmpty)
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.payloadTooLarge])
        #expect(letters[0].details["limit"] == 4096)
        #expect((letters[0].details["size"]?.integerValue ?? 0) > 4096)
        #expect(harness.commits[.commands] == 1)
    }

    @Test("end for an activity with no state is dead-lettered and creates nothing")
    func endWithoutState() throws {
        var harness = DispatcherHarness()
        harness.restore(tokens: [registered(tokenA)])
        harness.command(0, #"{"activity_id": "match-42", "event": "end"}"#)
        #expect(harness.sent.isEmpty)
        #expect(try harness.deadLetters().map(\.reason) == [.invalidCommand])
        #expect(try harness.deadLetters().first?.message.contains("no state") == true)
        #expect(harness.produced(on: .state).isEmpty)
        #expect(harness.commits[.commands] == 1)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"n": 1}}"#)
        harness.advance(by: 1)
        #expect(harness.sent.count == 1, "the activity was not left ended")
    }

    @Test("a command that would make the push too large is refused; the previous state stays and later updates go out")
    func payloadTooLargeKeepsState() throws {
        var harness = DispatcherHarness()
        harness.restore(tokens: [registered(tokenA)])
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"n": 1}}"#)
        harness.advance(by: 1)
        let big = String(repeating: "x", count: 4100)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"note": "\#(big)"}}"#)
        harness.advance(by: 1)
        harness.command(2, #"{"activity_id": "match-42", "content_state": {"n": 2}}"#)
        harness.advance(by: 1)
        #expect(try harness.deadLetters().map(\.reason) == [.payloadTooLarge])
        #expect(harness.sent.count == 2)
        #expect(try JSONValue.parse(harness.sent[1].payload)["aps"]?["content-state"] == ["n": 2])
        #expect(harness.commits[.commands] == 3)
    }

    @Test("records that arrive during the restore wait for it; re-delivered commands are recognised")
    func restoreOrdering() throws {
        var harness = DispatcherHarness()
        harness.command(10, #"{"activity_id": "match-42", "content_state": {"b": 2}}"#)
        harness.command(11, #"{"activity_id": "match-42", "content_state": {"c": 3}}"#)
        #expect(!harness.dispatcher.isReady)
        harness.restore(states: [ActivityState(activityID: match, contentState: ["a": 1, "b": 2], version: 2, createdAt: harness.now, lastOffset: 10)], tokens: [registered(tokenA)])
        harness.advance(by: 1)
        #expect(harness.sent.count == 1)
        #expect(try JSONValue.parse(harness.sent[0].payload)["aps"]?["content-state"] == ["a": 1, "b": 2, "c": 3])
        #expect(harness.commits[.commands] == 12)
    }

    @Test("the sweep tombstones expired activities, their tokens, and lapsed registrations")
    func sweep() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.maxAge = 3600
        var harness = DispatcherHarness(configuration: configuration)
        let other = try ActivityID("delivery-7")
        harness.restore(
            states: [ActivityState(activityID: match, contentState: ["a": 1], version: 1, createdAt: harness.now, lastOffset: 0)],
            tokens: [registered(tokenA), TokenRegistration(activityID: other, token: tokenB, expiresAt: harness.now + 60)])
        harness.now = harness.now + 61
        harness.run(harness.dispatcher.sweep(now: harness.now))
        #expect(harness.produced(on: .tokenStore).map(\.key) == ["delivery-7\u{1F}\(tokenB.hex)"])
        harness.now = harness.now + 3600
        harness.run(harness.dispatcher.sweep(now: harness.now))
        #expect(harness.produced(on: .state).map(\.key) == ["match-42"])
        #expect(harness.produced(on: .state).allSatisfy { $0.value == nil })
        #expect(harness.produced(on: .tokenStore).map(\.key) == ["delivery-7\u{1F}\(tokenB.hex)", "match-42\u{1F}\(tokenA.hex)"])
        #expect(harness.dispatcher.activityCount == 0)
    }
}

@Suite("BackpressureGate")
struct BackpressureGateTests {
    @Test("pauses at the high watermark and resumes only below the low one")
    func hysteresis() {
        var gate = BackpressureGate(highWatermark: 100, lowWatermark: 50)
        #expect(gate.update(outstanding: 99) == .none)
        #expect(gate.update(outstanding: 100) == .pause)
        #expect(gate.update(outstanding: 150) == .none)
        #expect(gate.update(outstanding: 51) == .none)
        #expect(gate.isPaused)
        #expect(gate.update(outstanding: 50) == .resume)
        #expect(gate.update(outstanding: 99) == .none)
        #expect(!gate.isPaused)
    }

    @Test("holds each pausable partition once while paused, again after a release, none once open")
    func held() {
        var gate = BackpressureGate(highWatermark: 10, lowWatermark: 5)
        #expect(gate.hold([0, 1]) == [], "open: nothing to hold")
        #expect(gate.update(outstanding: 10) == .pause)
        #expect(gate.hold([0, 1]) == [0, 1])
        // Partition 2 was catching up at the pause; it may be paused now.
        #expect(gate.hold([0, 1, 2]) == [2])
        #expect(gate.hold([0, 1, 2]) == [])
        // Partition 1 restored again and resumed to catch up: held once it has caught up.
        gate.released(1)
        #expect(gate.hold([0, 2]) == [])
        #expect(gate.hold([0, 1, 2]) == [1])
        #expect(gate.held == [0, 1, 2])
        #expect(gate.update(outstanding: 5) == .resume)
        #expect(gate.held.isEmpty)
        #expect(gate.hold([0, 1, 2]) == [])
    }
}
