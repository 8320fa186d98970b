import Foundation
import Kafka
import LiveDispatchCore
import Testing

/// A broadcast activity's channel lifecycle as real processes: the embedded
/// Kafka cluster process, the APNs simulator process over TLS (recording
/// every push) and `livedispatch run`; the channel is checked with
/// `livedispatch channels get` as a process.
@Suite("Broadcast channels end to end", .serialized)
struct BroadcastEndToEndTests {
    static let activity = "match-broadcast"

    func channelsGet(_ channelID: String, configuration: String) throws -> ProcessResult {
        try runProcess(["channels", "get", channelID, "--config", configuration])
    }

    /// The channels `GET /v1/channels?activity=` lists.
    func listedChannels(port: Int) throws -> [JSONValue] {
        let answer = try httpRequest("GET", port: port, "/v1/channels?activity=\(Self.activity)", headers: ["Authorization": "Bearer \(IngestAPITests.readKey)"])
        return try JSONValue.parse(answer.body)["channels"]?.arrayValue ?? []
    }

    @Test("a broadcast start creates a channel published on channels and listed by GET /v1/channels; each update and the end reach it once; after the dismissal it is deleted and tombstoned")
    func lifecycle() async throws {
        let stack = try await WorkerStack()
        let port = try freePort()
        let configuration = try stack.writeConfiguration(adminPort: port, extra: IngestAPITests.http())
        let worker = try await stack.startWorker(configuration: configuration)
        let device = token(31, salt: 11)
        try await stack.register(device, for: Self.activity)
        try await stack.produce("livedispatch.commands", key: Self.activity, #"{"activity_id": "\#(Self.activity)", "event": "start", "broadcast": true, "storage_policy": "most-recent", "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}, "attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"}, "alert": {"title": "Owls v Hawks", "body": "Kick-off"}}"#)

        // The channel is created on the simulator and published for backends.
        let published = try await stack.waitWithDiagnostics("the channel on livedispatch.channels", workers: [worker]) {
            try await stack.read("livedispatch.channels").first { $0.value != nil }
        }
        #expect(published.key.map { String(decoding: $0, as: UTF8.self) } == Self.activity)
        let record = try JSONValue.parse(published.value ?? [])
        let channelID = try #require(record["channel_id"]?.stringValue)
        #expect(record["activity_id"] == .string(Self.activity))
        #expect(record["environment"] == "production")
        #expect(record["storage_policy"] == "most-recent")
        #expect(record["created_at"]?.numberValue != nil)
        let listed = try listedChannels(port: port)
        #expect(listed.count == 1 && listed.first?["channel_id"] == .string(channelID) && listed.first?["storage_policy"] == "most-recent")
        let exists = try channelsGet(channelID, configuration: configuration)
        #expect(exists.status == 0, "\(exists.standardError)")

        // The registered device's token is an update token: the start
        // reaches it as an update of the same state and alert, without the
        // attributes and channel only a start to a push-to-start token names.
        let started = try await stack.waitWithDiagnostics("the start's state on the device", workers: [worker]) {
            stack.pushesByToken()[device]?.first
        }
        #expect(started.event == "update")
        #expect(started.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"])
        #expect(started.aps["alert"]?["title"] == "Owls v Hawks")
        #expect(started.aps["input-push-channel"] == nil && started.aps["attributes"] == nil)

        // An update: one broadcast to the channel, besides the device's own push.
        try await stack.produce("livedispatch.commands", key: Self.activity, #"{"activity_id": "\#(Self.activity)", "content_state": {"teamOneScore": 1}}"#)
        let update = try await stack.waitWithDiagnostics("the update broadcast", workers: [worker]) {
            stack.pushes().first { $0.value["channel"]?.stringValue == channelID }
        }
        #expect(update.event == "update")
        #expect(update.contentState == ["teamOneScore": 1, "teamTwoScore": 0, "period": "first_half"])
        #expect(update.headers["apns-channel-id"] == channelID)
        #expect(update.headers["apns-topic"] == nil)
        #expect(update.headers[":path"] == "/4/broadcasts/apps/\(WorkerStack.bundleID)")
        _ = try await stack.waitWithDiagnostics("the update to the device", workers: [worker]) {
            stack.pushesByToken()[device]?.contains { $0.event == "update" && $0.contentState["teamOneScore"] == 1 } == true ? true : nil
        }

        // The end, dismissed a few seconds later: broadcast once, then the channel is deleted.
        let dismissal = Int(Date().timeIntervalSince1970) + 4
        try await stack.produce("livedispatch.commands", key: Self.activity, #"{"activity_id": "\#(Self.activity)", "event": "end", "content_state": {"teamOneScore": 2}, "dismissal_date": \#(dismissal)}"#)
        let end = try await stack.waitWithDiagnostics("the end broadcast", workers: [worker]) {
            stack.pushes().first { $0.value["channel"]?.stringValue == channelID && $0.event == "end" }
        }
        #expect(end.aps["dismissal-date"] == .integer(Int64(dismissal)))
        let tombstoned = try await stack.waitWithDiagnostics("the channels record tombstoned", workers: [worker], timeout: .seconds(60)) {
            try await stack.read("livedispatch.channels").last.flatMap { $0.value == nil ? true : nil }
        }
        #expect(tombstoned)
        #expect(try listedChannels(port: port).isEmpty, "a deleted channel is not listed")
        _ = try await stack.waitWithDiagnostics("the channel deleted on the simulator", workers: [worker], timeout: .seconds(30)) {
            try channelsGet(channelID, configuration: configuration).status != 0 ? true : nil
        }
        let broadcasts = stack.pushes().filter { $0.value["channel"]?.stringValue == channelID }
        #expect(broadcasts.map(\.event) == ["update", "end"], "each version reached the channel once")
        #expect(stack.pushesByToken()[device]?.map(\.event) == ["update", "update", "end"], "the device: the start as an update, the update, the end")
        #expect(try await stack.deadLetters().isEmpty)
        #expect(try await worker.stop() == 0)
    }
}
