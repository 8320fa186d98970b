@testable import LiveDispatchCore
import Testing

/// The bytes the router writes for a command, written member by member,
/// are those of the command's JSON value, and read back as the same command.
@Suite("Command serialization")
struct CommandSerializationTests {
    static let commands: [ActivityCommand] = {
        let match = try! ActivityID("match-\"7\" é")
        var full = ActivityCommand(
            id: "events/3@17/goal", activityID: match, event: .start, contentState: ["home": 2, "note": "a \"quoted\" line\n", "nested": ["x": [1, 2.5, nil]]],
            replaceState: true, timestamp: UnixTime(seconds: 1_764_010_000.25), priority: try! PushPriority(10),
            staleDate: UnixTime(seconds: 1_764_013_600), dismissalDate: UnixTime(seconds: 0), relevanceScore: 0.125,
            alert: ActivityAlert(title: "Goal", body: "Lions \u{01} score", sound: "default"), attributesType: "MatchAttributes",
            attributes: ["home": "Lions", "away": "Bears"], inputPushToken: true, inputPushChannel: nil,
            audiences: [try! AudienceKey("team-lions"), try! AudienceKey("league")], app: "sports",
            source: CommandSource(topic: "events", partition: 3, offset: 17, rule: "goal"), broadcast: true, storagePolicy: .mostRecent)
        var channelStart = full
        channelStart.broadcast = nil
        channelStart.storagePolicy = nil
        channelStart.inputPushChannel = "ch-1"
        channelStart.audiences = []
        channelStart.alert = ActivityAlert(title: .localized(key: "KICK_OFF", arguments: ["Lions", "Bears \"B\""]), body: .localized(key: "GO", arguments: []))
        full.alert?.sound = nil
        return [
            ActivityCommand(activityID: match),
            ActivityCommand(activityID: match, event: .end, dismissalDate: UnixTime(seconds: 1_764_020_000.5), source: CommandSource(topic: "t", partition: 0, offset: 0)),
            ActivityCommand(id: "x", activityID: match, contentState: [:], priority: try! PushPriority(5), relevanceScore: 3),
            full, channelStart,
        ]
    }()

    @Test("written bytes equal the JSON value's and read back as the command")
    func bytesEqualTheValue() throws {
        for command in Self.commands {
            let bytes = command.serialized()
            #expect(bytes == command.json.serialized(), "\(String(decoding: bytes, as: UTF8.self))")
            #expect(try ActivityCommand(bytes: bytes) == command)
        }
    }
}
