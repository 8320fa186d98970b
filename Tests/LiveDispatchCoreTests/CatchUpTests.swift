@testable import LiveDispatchCore
import Testing

/// A new owner of a partition replays the commands its previous owner read;
/// the previous owner may have pushed any of their states, so the new owner
/// must not push an intermediate one (semantic 2).
@Suite("PartitionDispatcher, taking a partition over")
struct CatchUpTests {
    let match = try! ActivityID("match-42")
    let device = try! DeviceToken(hex: String(repeating: "ab", count: 32))
    let configuration = PartitionDispatcher.Configuration(coalescer: .init(window: 0), catchUpLimit: 30)

    func update(_ score: Int) -> String { #"{"activity_id": "match-42", "content_state": {"score": \#(score)}}"# }

    /// The snapshot the previous owner last wrote: score 1 at offset 0.
    func snapshot(_ harness: DispatcherHarness) -> ActivityState {
        var state = ActivityState(activityID: match, contentState: ["score": 1], version: 1, createdAt: harness.now, lastOffset: 0)
        state.timestamp = harness.now
        return state
    }

    func takenOver(holdingUntil end: Int64) -> DispatcherHarness {
        var harness = DispatcherHarness(configuration: configuration)
        harness.dispatcher.holdPushes(untilCommandOffset: end)
        harness.restore(states: [snapshot(harness)], tokens: [TokenRegistration(activityID: match, token: device)])
        return harness
    }

    @Test("the replay up to the end at assignment is pushed once, with the newest state, and its offsets commit")
    func replayPushedOnce() {
        var harness = takenOver(holdingUntil: 4)
        #expect(harness.dispatcher.isCatchingUp)
        harness.command(1, update(2))
        harness.command(2, update(3))
        #expect(harness.sent.isEmpty, "no intermediate state while replaying")
        harness.command(3, update(4))
        #expect(!harness.dispatcher.isCatchingUp)
        #expect(harness.sent.map { $0.push.contentState["score"] } == [4])
        #expect(harness.commits[.commands] == 4)
        harness.command(4, update(5))
        #expect(harness.sent.map { $0.push.contentState["score"] } == [4, 5], "after the replay pushes flow as usual")
    }

    @Test("the replay's last command still in its coalescing window when the replay ends is pushed with what was held, never after it", arguments: [false, true])
    func lastCommandInItsWindow(drainInstead: Bool) {
        var harness = DispatcherHarness(configuration: PartitionDispatcher.Configuration(coalescer: .init(window: 0.25), catchUpLimit: 30))
        harness.dispatcher.holdPushes(untilCommandOffset: drainInstead ? 10 : 3)
        var state = ActivityState(activityID: match, contentState: ["score": 1], version: 1, createdAt: harness.now, lastOffset: 0)
        state.timestamp = harness.now
        harness.restore(states: [state], tokens: [TokenRegistration(activityID: match, token: device)])
        harness.command(1, update(2))
        harness.advance(by: 0.5)
        #expect(harness.sent.isEmpty, "score 2 flushed from its window and held by the catch-up")
        // The previous owner may have pushed score 3: the new owner must not push 2 after it.
        harness.command(2, update(3))
        if drainInstead { harness.run(harness.dispatcher.drain(now: harness.now)) }
        harness.advance(by: 0.5)
        #expect(harness.sent.map { $0.push.contentState["score"] } == [3])
    }

    @Test("pushes held past catchUpLimit go out with the newest state read so far")
    func limit() {
        var harness = takenOver(holdingUntil: 100)
        harness.command(1, update(2))
        harness.command(2, update(3))
        harness.advance(by: 29)
        #expect(harness.sent.isEmpty)
        harness.advance(by: 2)
        #expect(harness.sent.map { $0.push.contentState["score"] } == [3])
        #expect(!harness.dispatcher.isCatchingUp)
    }

    @Test("a start and updates replayed together go out as one push with the newest state (an update to update tokens); an end replayed goes out as the end")
    func startAndEnd() {
        var harness = DispatcherHarness(configuration: configuration)
        harness.dispatcher.holdPushes(untilCommandOffset: 3)
        harness.restore(tokens: [TokenRegistration(activityID: match, token: device)])
        harness.command(0, #"{"activity_id": "match-42", "event": "start", "content_state": {"score": 0}, "attributes_type": "Match", "attributes": {}, "alert": {"title": "Kick-off", "body": "0-0"}}"#)
        harness.command(1, update(1))
        harness.command(2, update(2))
        #expect(harness.sent.map(\.push.event) == [.update], "an update token is never sent a start")
        #expect(harness.sent.first?.push.contentState == ["score": 2])
        #expect(harness.sent.first?.push.alert?.title == "Kick-off")

        var ending = takenOver(holdingUntil: 3)
        ending.command(1, update(2))
        ending.command(2, #"{"activity_id": "match-42", "event": "end", "content_state": {"score": 2}}"#)
        #expect(ending.sent.map(\.push.event) == [.end])
    }

    @Test("an empty partition holds nothing, and a drain pushes what a catch-up holds")
    func emptyAndDrain() {
        var empty = DispatcherHarness(configuration: configuration)
        empty.dispatcher.holdPushes(untilCommandOffset: 0)
        empty.restore(tokens: [TokenRegistration(activityID: match, token: device)])
        #expect(!empty.dispatcher.isCatchingUp)

        var draining = takenOver(holdingUntil: 50)
        draining.command(1, update(7))
        #expect(draining.sent.isEmpty && !draining.dispatcher.isIdle)
        draining.run(draining.dispatcher.drain(now: draining.now))
        #expect(draining.sent.map { $0.push.contentState["score"] } == [7])
        #expect(draining.dispatcher.isIdle)
    }

    @Test("registrations not yet read at assignment hold the catch-up too: the replayed state is pushed once they are read, to every token they register")
    func waitsForTheRegistrations() {
        let second = try! DeviceToken(hex: String(repeating: "cd", count: 32))
        var harness = DispatcherHarness(configuration: configuration)
        // Commands 1...2 and registrations 0...1 are there at assignment;
        // the previous owner stored no registration.
        harness.dispatcher.holdPushes(untilCommandOffset: 3, tokenOffset: 2)
        harness.restore(states: [snapshot(harness)])
        harness.command(1, update(2))
        harness.command(2, update(3))
        #expect(harness.dispatcher.isCatchingUp, "the replay is read, the registrations are not")
        #expect(harness.sent.isEmpty)
        harness.token(0, #"{"activity_id": "match-42", "token": "\#(device.hex)"}"#)
        #expect(harness.dispatcher.isCatchingUp)
        harness.token(1, #"{"activity_id": "match-42", "token": "\#(second.hex)"}"#)
        #expect(!harness.dispatcher.isCatchingUp)
        for token in [device, second] {
            #expect(harness.sent.last { $0.token == token }?.push.contentState["score"] == 3, "\(token) did not end with the replayed state")
        }

        // Registrations read first, then the replay: it ends with the replay.
        var other = DispatcherHarness(configuration: configuration)
        other.dispatcher.holdPushes(untilCommandOffset: 3, tokenOffset: 1)
        other.restore(states: [snapshot(other)])
        other.token(0, #"{"activity_id": "match-42", "token": "\#(device.hex)"}"#)
        other.command(1, update(2))
        #expect(other.dispatcher.isCatchingUp)
        #expect(!other.sent.contains { $0.push.contentState["score"] == 2 }, "nothing of the replay before its end")
        other.command(2, update(3))
        #expect(!other.dispatcher.isCatchingUp)
        #expect(other.sent.last?.push.contentState["score"] == 3)
    }

    @Test("a token registered during the catch-up of an activity without a snapshot is sent the replayed end, not taken as holding it")
    func registeredDuringTheCatchUp() {
        var harness = DispatcherHarness(configuration: configuration)
        harness.dispatcher.holdPushes(untilCommandOffset: 3, tokenOffset: 1)
        harness.restore()
        harness.command(0, update(1))
        harness.token(0, #"{"activity_id": "match-42", "token": "\#(device.hex)"}"#)
        #expect(harness.sent.isEmpty, "nothing of the replay before its end")
        harness.command(1, update(2))
        harness.command(2, #"{"activity_id": "match-42", "event": "end", "content_state": {"score": 3}}"#)
        #expect(!harness.dispatcher.isCatchingUp)
        #expect(harness.sent.map(\.token) == [device])
        #expect(harness.sent.last?.push.event == .end)
        #expect(harness.sent.last?.push.contentState["score"] == 3)
    }
}
