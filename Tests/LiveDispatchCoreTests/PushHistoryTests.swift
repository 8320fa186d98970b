@testable import LiveDispatchCore
import Testing

/// The push summaries a `state` snapshot carries (`pushes`), which the read
/// API shows as an activity's push history.
@Suite("Push history in state snapshots")
struct PushHistoryTests {
    let match = try! ActivityID("match-42")
    let tokens = ["aa01", "bb02", "cc03"].map { try! DeviceToken(hex: String(repeating: $0, count: 16)) }

    func registration(_ token: DeviceToken) -> TokenRegistration {
        TokenRegistration(activityID: match, token: token, environment: .production)
    }

    func lastSnapshot(_ harness: DispatcherHarness) throws -> JSONValue {
        try JSONValue.parse(harness.produced(on: .state).last?.value ?? [])
    }

    @Test("the snapshot's bytes, written without building the history, are those of its JSON value")
    func serializedSnapshotMatchesValue() throws {
        var state = ActivityState(activityID: match, createdAt: UnixTime(seconds: 1_764_010_000.25))
        state.contentState = ["home": 2, "note": "a \"quoted\" line\n", "pushes": "a field of the state named as the history"]
        state.app = "sports"
        let history = (0..<PushSummary.historyLimit).map { index in
            PushSummary(
                version: UInt64(index + 1), event: index == 0 ? .start : .update, completedAt: UnixTime(seconds: 1_764_010_000.5 + Double(index)),
                commands: index + 1, delivered: 1_000 * index,
                failed: index % 3 == 0 ? [:] : ["Unregistered": index, "Bad\u{01}\"Reason": 1])
        }
        let channel = ActivityChannel(id: "ch-1", environment: .production, storagePolicy: .mostRecent, createdAt: UnixTime(seconds: 1_764_010_001))
        // Every field set, command digests written digit by digit among them.
        var full = state
        full.timestamp = UnixTime(seconds: 1_764_010_002)
        full.staleDate = UnixTime(seconds: 1_764_013_600.5)
        full.dismissalDate = UnixTime(seconds: 0)
        full.relevanceScore = 0.75
        full.attributesType = "MatchAttributes"
        full.attributes = ["home": "Lions", "away": "Bears"]
        full.endedAt = UnixTime(seconds: 1_764_010_003)
        full.lastOffset = 9_000_000_001
        full.priority10SentAt = [UnixTime(seconds: 1_764_010_000), UnixTime(seconds: 1_764_010_001.125)]
        full.commandIDs = [
            .init(digest: 0, appliedAt: UnixTime(seconds: 1_764_010_000)),
            .init(digest: .max, appliedAt: UnixTime(seconds: 1_764_010_000.123456)),
            .init(id: "events/3@17/goal", appliedAt: UnixTime(seconds: 0.5)),
            .init(digest: 0x0123_4567_89ab_cdef, appliedAt: UnixTime(seconds: 253_402_300_799)),
        ]
        full.sourceMarks = [
            .init(topic: "sports.scores", partition: 3, offset: 1234, rules: ["goal", ""], appliedAt: UnixTime(seconds: 1_764_010_000.25)),
            .init(topic: "t\"\u{1F}é", partition: .max, offset: .max, rules: [], appliedAt: UnixTime(seconds: 1_764_010_000)),
            .init(topic: "d", partition: 0, offset: 0, rules: ["r"], appliedAt: UnixTime(seconds: 1_764_010_000.123456)),
        ]
        for (state, summaries, withChannel) in [
            (state, [], false), (state, Array(history.prefix(1)), false), (state, history, false), (state, history, true),
            (full, [], false), (full, history, true),
        ] {
            var expected = PushSummary.snapshot(state, history: summaries)
            if withChannel, case .object(var fields) = expected {
                fields["channel"] = channel.json
                expected = .object(fields)
            }
            let bytes = PushSummary.serializedSnapshot(state, history: summaries, channel: withChannel ? channel.json : JSONValue?.none)
            #expect(bytes == expected.serialized())
            #expect(PushSummary.history(of: try JSONValue.parse(bytes)) == summaries)
            #expect(try ActivityState(json: JSONValue.parse(bytes)).commandIDs == state.commandIDs)
            #expect(try ActivityState(json: JSONValue.parse(bytes)).sourceMarks == state.sourceMarks)
        }
    }

    @Test("a completed push is summarised in the snapshot: version, event, commands, deliveries and failures by reason")
    func summary() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.fanOut.retry.maxAttempts = 2
        var harness = DispatcherHarness(configuration: configuration)
        harness.outcome = { send in
            switch send.token {
            case tokens[0]: .tokenInvalid(reason: "Unregistered")
            case tokens[1]: .delivered
            default: .retryable(reason: "ServiceUnavailable", after: nil)
            }
        }
        harness.restore(tokens: tokens.map(registration))
        harness.command(0, #"{"activity_id": "match-42", "content_state": {"n": 1}}"#)
        harness.command(1, #"{"activity_id": "match-42", "content_state": {"n": 2}}"#)
        for _ in 0..<10 { harness.advance(by: 1) }

        let snapshot = try lastSnapshot(harness)
        #expect(try ActivityState(json: snapshot).contentState == ["n": 2], "the snapshot is still a state")
        let history = PushSummary.history(of: snapshot)
        #expect(history == [PushSummary(
            version: 1, event: .update, completedAt: history.first?.completedAt ?? harness.now, commands: 2, delivered: 1,
            failed: ["Unregistered": 1, "ServiceUnavailable": 1])])
        #expect(harness.dispatcher.pushes(of: match) == history)
    }

    @Test("the newest 10 are kept, restored with the state and continued after a restore")
    func boundedAndRestored() throws {
        var harness = DispatcherHarness()
        harness.restore(tokens: [registration(tokens[0])])
        for offset in 0..<12 {
            harness.command(Int64(offset), #"{"activity_id": "match-42", "content_state": {"n": \#(offset)}}"#)
            harness.advance(by: 2)
        }
        let snapshot = try lastSnapshot(harness)
        let history = PushSummary.history(of: snapshot)
        #expect(history.map(\.version) == Array(3...12))
        #expect(history.allSatisfy { $0.delivered == 1 && $0.failed.isEmpty && $0.commands == 1 })

        var restarted = DispatcherHarness()
        restarted.dispatcher.restoreState(key: "match-42", value: snapshot.serialized())
        restarted.restore(tokens: [registration(tokens[0])])
        #expect(restarted.dispatcher.pushes(of: match) == history)
        restarted.command(12, #"{"activity_id": "match-42", "event": "end"}"#)
        let after = PushSummary.history(of: try lastSnapshot(restarted))
        #expect(after.map(\.version) == Array(4...13))
        #expect(after.last?.event == .end)
    }

    @Test("a tombstone forgets the history")
    func forgotten() throws {
        var harness = DispatcherHarness()
        let state = ActivityState(activityID: match, version: 1, createdAt: harness.now)
        harness.dispatcher.restoreState(
            key: "match-42", value: PushSummary.snapshot(state, history: [PushSummary(version: 1, event: .update, completedAt: harness.now, commands: 1)]).serialized())
        #expect(harness.dispatcher.pushes(of: match).count == 1)
        harness.dispatcher.restoreState(key: "match-42", value: nil)
        #expect(harness.dispatcher.pushes(of: match).isEmpty)
    }

    @Test("a snapshot's pushes are read tolerantly: what is not a summary is skipped, the state still restores")
    func tolerant() throws {
        let good: JSONValue = ["version": 2, "event": "update", "completed_at": 1_764_000_000.5, "commands": 1, "delivered": 3, "failed": ["BadDeviceToken": 1]]
        let snapshot: JSONValue = [
            "activity_id": "match-42", "content_state": ["n": 1], "version": 2, "created_at": 1_764_000_000,
            "pushes": [
                "text", 7, ["version": -1, "event": "update", "completed_at": 1, "commands": 1, "delivered": 1, "failed": [:]],
                ["version": 1, "event": "sideways", "completed_at": 1, "commands": 1, "delivered": 1, "failed": [:]],
                ["version": 1, "event": "update", "completed_at": 1e300, "commands": 1, "delivered": 1, "failed": [:]],
                ["version": 1, "event": "update", "completed_at": 1, "commands": 1, "delivered": 1, "failed": ["x": "many"]],
                good,
            ],
        ]
        #expect(PushSummary.history(of: snapshot) == [PushSummary(
            version: 2, event: .update, completedAt: UnixTime(seconds: 1_764_000_000.5), commands: 1, delivered: 3, failed: ["BadDeviceToken": 1])])
        #expect(PushSummary.history(of: ["pushes": "nope"]).isEmpty)
        #expect(PushSummary.history(of: ["pushes": .array(Array(repeating: good, count: 50))]).count == PushSummary.historyLimit)

        var harness = DispatcherHarness()
        harness.dispatcher.restoreState(key: "match-42", value: snapshot.serialized())
        harness.restore()
        #expect(harness.dispatcher.state(of: match)?.version == 2)
        #expect(harness.dispatcher.pushes(of: match).count == 1)
    }

    @Test("failure reasons are bounded in number and length")
    func boundedReasons() {
        var counts = PushSummary.Counts()
        for index in 0..<12 { counts.failed("reason-\(index)") }
        counts.failed(String(repeating: "x", count: 500))
        #expect(counts.failed.count == PushSummary.reasonLimit + 1)
        #expect(counts.failed["other"] == 5)
        #expect(counts.failed.keys.allSatisfy { $0.count <= PushSummary.reasonLength })
    }
}
