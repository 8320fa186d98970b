@testable import LiveDispatchCore
import Testing

@Suite("Broadcast channels in the partition's machine")
struct BroadcastChannelTests {
    let match = try! ActivityID("match-42")
    let tokenA = try! DeviceToken(hex: String(repeating: "aa01", count: 16))
    let channelID = "dGVzdC1jaGFubmVsLTE="

    func start(_ extra: String = "") -> String {
        #"{"activity_id": "match-42", "event": "start", "content_state": {"home": 0}, "alert": {"title": "Kick-off", "body": "Owls v Hawks"}, "attributes_type": "MatchAttributes", "attributes": {"home": "Owls"}, "broadcast": true\#(extra)}"#
    }

    func update(_ score: Int, _ extra: String = "") -> String {
        #"{"activity_id": "match-42", "content_state": {"home": \#(score)}\#(extra)}"#
    }

    /// A harness with `tokenA` registered and the channel of `match` created.
    func withChannel(_ policy: String = "") -> DispatcherHarness {
        var harness = DispatcherHarness()
        harness.restore(tokens: [TokenRegistration(activityID: match, token: tokenA)])
        harness.command(0, start(policy))
        harness.run(harness.dispatcher.channelCreated(match, id: channelID, now: harness.now))
        return harness
    }

    func channelSends(_ harness: DispatcherHarness) -> [PartitionDispatcher.Send] { harness.sent.filter { $0.channel != nil } }

    @Test("a broadcast start asks for one channel and holds its pushes until the channel exists")
    func creationOnce() throws {
        var harness = DispatcherHarness()
        harness.restore(tokens: [TokenRegistration(activityID: match, token: tokenA)])
        harness.command(0, start(#", "storage_policy": "no-storage""#))
        #expect(harness.channelRequests == [.create(match, environment: .production, storagePolicy: .noStorage, app: nil)])
        #expect(harness.sent.isEmpty, "the start waits for the channel id")
        harness.command(1, start())
        harness.command(2, update(1))
        harness.advance(by: 1)
        #expect(harness.channelRequests.count == 1, "one channel per activity")
        #expect(harness.sent.isEmpty)
        #expect(!harness.dispatcher.isIdle)

        harness.run(harness.dispatcher.channelCreated(match, id: channelID, now: harness.now))
        let records = harness.produced(on: .channels)
        #expect(records.count == 1)
        #expect(records.first?.key == "match-42")
        #expect(records.first?.partition == 2)
        let record = try JSONValue.parse(records.first?.value ?? [])
        #expect(record["activity_id"] == "match-42")
        #expect(record["channel_id"] == .string(channelID))
        #expect(record["environment"] == "production")
        #expect(record["storage_policy"] == "no-storage")
        #expect(record["created_at"]?.numberValue == harness.now.seconds)
        #expect(harness.observations.contains(.channelCreated(match, ActivityChannel(id: channelID, environment: .production, storagePolicy: .noStorage, createdAt: harness.now))))

        // The start, merged with the update, goes to the update token as an
        // update (its device runs the activity already); the channel gets no start.
        #expect(harness.sent.count == 1)
        #expect(channelSends(harness).isEmpty)
        let aps = try JSONValue.parse(harness.sent[0].payload)["aps"]
        #expect(aps?["event"] == "update")
        #expect(aps?["input-push-channel"] == nil)
        #expect(aps?["content-state"] == ["home": 1])
        let snapshot = try #require(harness.produced(on: .state).last?.value)
        #expect(ActivityChannel.inSnapshot(try JSONValue.parse(snapshot))?.id == channelID)
        #expect(harness.commits[.commands] == 3)
        #expect(harness.dispatcher.isIdle)
        let completed = harness.observations.compactMap { if case .pushCompleted(_, _, let tokens, _, _) = $0 { tokens } else { nil } }
        #expect(completed == [1], "the channel is not counted as a token")
    }

    @Test("updates and ends go to the channel once each, as a broadcast within 5120 bytes")
    func updatesBroadcast() throws {
        var harness = withChannel()
        harness.command(1, update(1))
        harness.advance(by: 1)
        let sends = channelSends(harness)
        #expect(sends.count == 1)
        #expect(sends.first?.channel?.id == channelID)
        #expect(sends.first?.push.event == .update)
        #expect(harness.sent.filter { $0.token == tokenA }.map(\.push.event) == [.update, .update])
        let request = try #require(sends.first).request(bundleID: "com.example.app", apnsID: "id", now: harness.now)
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.headers.contains { $0.name == "apns-channel-id" && $0.value == channelID })
        #expect(!request.headers.contains { $0.name == "apns-topic" })
        #expect(request.expiration != nil, "a most-recent channel keeps the push until it is stale")

        harness.command(2, #"{"activity_id": "match-42", "event": "end", "content_state": {"home": 2}}"#)
        harness.advance(by: 1)
        #expect(channelSends(harness).map(\.push.event) == [.update, .end])
        #expect(harness.dispatcher.isIdle)
    }

    @Test("a no-storage channel's broadcasts expire at once")
    func noStorageExpiration() throws {
        var harness = withChannel(#", "storage_policy": 0"#)
        harness.command(1, update(1))
        harness.advance(by: 1)
        let send = try #require(channelSends(harness).first)
        let request = send.request(bundleID: "com.example.app", apnsID: "id", now: harness.now)
        #expect(request.headers.contains { $0.name == "apns-expiration" && $0.value == "0" })
    }

    @Test("the channel's versions never go back: a retry sends the newest, and an older one never follows a newer")
    func neverStale() throws {
        var harness = withChannel()
        var failures = 1
        harness.outcome = { send in
            guard send.channel != nil, failures > 0 else { return .delivered }
            failures -= 1
            return .retryable(reason: "500 InternalServerError", after: nil)
        }
        harness.command(1, update(1))
        harness.advance(by: 0.3)
        harness.command(2, update(2))
        harness.command(3, update(3))
        harness.advance(by: 10)
        let versions = channelSends(harness).map(\.push.version)
        #expect(versions.first == 2)
        #expect(versions.last == 3, "the newest version reaches the channel")
        #expect(versions == versions.sorted(), "never an older version after a newer one")
        #expect(versions.count <= 3)
        let last = try JSONValue.parse(try #require(channelSends(harness).last).payload)
        #expect(last["aps"]?["content-state"] == ["home": 3])
        #expect(harness.dispatcher.isIdle)
        #expect(try harness.deadLetters().isEmpty)
    }

    @Test("a restored snapshot's channel is used again, and no second channel is created")
    func restore() throws {
        let first = withChannel()
        let snapshot = try #require(first.produced(on: .state).last?.value)
        var harness = DispatcherHarness()
        harness.dispatcher.restoreState(key: "match-42", value: snapshot)
        harness.run(harness.dispatcher.finishRestore(now: harness.now))
        #expect(harness.dispatcher.channel(of: match)?.id == channelID)
        harness.command(5, start())
        harness.command(6, update(7))
        harness.advance(by: 1)
        #expect(harness.channelRequests.isEmpty)
        #expect(channelSends(harness).map(\.push.event) == [.update])

        // An older snapshot without a channel, or a broken one, restores without one.
        var tolerant = DispatcherHarness()
        let broken = try JSONValue.parse(snapshot)
        guard case .object(var fields) = broken else { Issue.record("snapshot is not an object"); return }
        fields["channel"] = ["channel_id": 5]
        tolerant.dispatcher.restoreState(key: "match-42", value: JSONValue.object(fields).serialized())
        tolerant.run(tolerant.dispatcher.finishRestore(now: tolerant.now))
        #expect(tolerant.dispatcher.state(of: match) != nil)
        #expect(tolerant.dispatcher.channel(of: match) == nil)
    }

    @Test("a failed creation is retried with the retry policy, then dead-lettered and the pushes go to the tokens")
    func creationFails() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.fanOut.retry.maxAttempts = 3
        var harness = DispatcherHarness(configuration: configuration)
        harness.restore(tokens: [TokenRegistration(activityID: match, token: tokenA)])
        harness.command(0, start())
        for _ in 0..<3 {
            harness.run(harness.dispatcher.channelCreateFailed(match, reason: "500 InternalServerError", retryable: true, now: harness.now, jitter: 0.5))
            harness.advance(by: 60)
        }
        #expect(harness.channelRequests.count == 3)
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.channelCreateFailed])
        #expect(letters.first?.details["attempts"] == 3)
        #expect(harness.sent.map(\.token) == [tokenA])
        let aps = try JSONValue.parse(harness.sent[0].payload)["aps"]
        #expect(aps?["event"] == "update")
        #expect(aps?["input-push-channel"] == nil)
        #expect(harness.produced(on: .channels).isEmpty)
        #expect(harness.dispatcher.isIdle)
    }

    @Test("after the end's dismissal the channel is deleted and its channels record tombstoned")
    func deletionAfterDismissal() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.sweepInterval = 1
        var harness = DispatcherHarness(configuration: configuration)
        harness.restore()
        harness.command(0, start())
        let channel = ActivityChannel(id: channelID, environment: .production, storagePolicy: .mostRecent, createdAt: harness.now)
        harness.run(harness.dispatcher.channelCreated(match, id: channelID, now: harness.now))
        let dismissal = harness.now.seconds + 30
        harness.command(1, #"{"activity_id": "match-42", "event": "end", "content_state": {"home": 2}, "dismissal_date": \#(dismissal)}"#)
        harness.advance(by: 5)
        #expect(channelSends(harness).map(\.push.event) == [.end])
        #expect(!harness.channelRequests.contains { if case .delete = $0 { true } else { false } }, "kept until the dismissal")
        harness.advance(by: 30)
        #expect(harness.channelRequests.last == .delete(match, channel))
        #expect(harness.produced(on: .channels).map(\.value) == [harness.produced(on: .channels).first?.value, nil])
        #expect(harness.dispatcher.channel(of: match) == nil)
        harness.run(harness.dispatcher.channelDeleted(match, channel, failure: "503 ServiceUnavailable", now: harness.now))
        #expect(try harness.deadLetters().map(\.reason) == [.channelDeleteFailed])
    }

    @Test("a broadcast start to audiences waits for the channel and carries input-push-channel")
    func audienceStartCarriesChannel() throws {
        var harness = DispatcherHarness()
        harness.restore()
        harness.command(0, start(#", "audiences": ["followers:owls"]"#))
        #expect(harness.produced(on: .starts).isEmpty, "held until the channel exists")
        harness.run(harness.dispatcher.channelCreated(match, id: channelID, now: harness.now))
        let starts = harness.produced(on: .starts)
        #expect(starts.count == 1)
        let audienceStart = try AudienceStart(bytes: try #require(starts.first?.value))
        #expect(audienceStart.push.inputPushChannel == channelID)
        #expect(try JSONValue.parse(try APNsPayload.encode(audienceStart.push))["aps"]?["input-push-channel"] == .string(channelID))
    }

    @Test("an activity that expires while its channel is being created has the channel deleted once APNs names it")
    func expiresWhileCreating() throws {
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.maxAge = 60
        configuration.sweepInterval = 1
        var harness = DispatcherHarness(configuration: configuration)
        harness.restore()
        harness.command(0, start())
        harness.advance(by: 61)
        #expect(harness.dispatcher.state(of: match) == nil)
        #expect(harness.commits[.commands] == 1, "the held start's offset completes with the activity")
        #expect(harness.dispatcher.isIdle)
        harness.run(harness.dispatcher.channelCreated(match, id: channelID, now: harness.now))
        #expect(harness.channelRequests.last == .delete(match, ActivityChannel(id: channelID, environment: .production, storagePolicy: .mostRecent, createdAt: harness.now)))
        #expect(harness.produced(on: .channels).isEmpty)
        #expect(harness.sent.isEmpty)
    }

    @Test("broadcast and storage_policy are checked and named")
    func decoding() throws {
        let update = #"{"activity_id": "a", "broadcast": true}"#
        #expect(throws: FieldError.self) { try ActivityCommand(bytes: Array(update.utf8)) }
        do {
            _ = try ActivityCommand(bytes: Array(update.utf8))
        } catch {
            #expect(error.field == "broadcast")
        }
        do {
            _ = try ActivityCommand(bytes: Array(start(#", "storage_policy": "forever""#).utf8))
            Issue.record("a bad storage policy was accepted")
        } catch {
            #expect(error.field == "storage_policy")
        }
        let command = try ActivityCommand(bytes: Array(start(#", "storage_policy": 1"#).utf8))
        #expect(command.broadcast == true)
        #expect(command.storagePolicy == .mostRecent)
        #expect(try ActivityCommand(json: command.json) == command)
    }
}
