import LiveDispatchCore
import Testing

@Suite("commands, registrations, states and dead letters from JSON")
struct DomainValueTests {
    @Test("a full command decodes with every field")
    func fullCommand() throws {
        let command = try ActivityCommand(json: try JSONValue.parse(#"""
            {"id": "evt-1", "activity_id": "match-42", "event": "update", "content_state": {"teamOneScore": 2},
             "replace_state": false, "timestamp": 1764000000.5, "priority": 10, "stale_date": "2025-11-24T18:00:00Z",
             "dismissal_date": 1764001000, "relevance_score": 50,
             "alert": {"title": "Goal!", "body": "Owls lead 2–1", "sound": "default"},
             "source": {"topic": "sports.scores", "partition": 3, "offset": 1234, "rule": "score-changed"}}
            """#))
        #expect(command.id == "evt-1")
        #expect(command.activityID.rawValue == "match-42")
        #expect(command.event == .update)
        #expect(command.contentState == ["teamOneScore": 2])
        #expect(command.timestamp == UnixTime(seconds: 1_764_000_000.5))
        #expect(command.priority == .immediate)
        #expect(command.staleDate == UnixTime(seconds: 1_764_007_200))
        #expect(command.dismissalDate == UnixTime(seconds: 1_764_001_000))
        #expect(command.relevanceScore == 50)
        #expect(command.alert == ActivityAlert(title: "Goal!", body: "Owls lead 2–1", sound: "default"))
        #expect(command.source == CommandSource(topic: "sports.scores", partition: 3, offset: 1234, rule: "score-changed"))
        #expect(try ActivityCommand(json: command.json) == command)
    }

    @Test(
        "a bad command names the field and the problem",
        arguments: [
            (#"[]"#, "expected an activity command as a JSON object, got array"),
            (#"{}"#, "field 'activity_id': is required"),
            (#"{"activity_id": ""}"#, "field 'activity_id': activity id is empty"),
            (#"{"activity_id": 42}"#, "field 'activity_id': expected a string, got int"),
            (#"{"activity_id": "a", "event": "pause"}"#, #"field 'event': "pause" is not an event (expected update, end or start)"#),
            (#"{"activity_id": "a", "content_state": [1]}"#, "field 'content_state': expected an object, got array"),
            (#"{"activity_id": "a", "priority": 7}"#, "field 'priority': priority 7 is not one APNs accepts (1, 5 or 10)"),
            (#"{"activity_id": "a", "stale_date": "soon"}"#, #"field 'stale_date': "soon" is not a date (expected Unix seconds or ISO-8601 such as 2025-11-24T18:00:00Z)"#),
            (#"{"activity_id": "a", "timestamp": true}"#, "field 'timestamp': expected a date (Unix seconds or an ISO-8601 string), got bool"),
            (#"{"activity_id": "a", "alert": {"title": "t"}}"#, "field 'alert.body': is required"),
            (#"{"activity_id": "a", "alert": {"title": 7, "body": "b"}}"#, #"field 'alert.title': expected text or {"loc_key": …, "loc_args": […]}, got int"#),
            (#"{"activity_id": "a", "alert": {"title": "t", "body": {"loc_args": ["x"]}}}"#, "field 'alert.body.loc_key': is required"),
            (#"{"activity_id": "a", "alert": {"title": {"loc_key": ""}, "body": "b"}}"#, "field 'alert.title.loc_key': must not be empty"),
            (#"{"activity_id": "a", "alert": {"title": {"loc_key": "K", "loc_args": ["x", 2]}, "body": "b"}}"#, "field 'alert.title.loc_args[1]': expected a string, got int"),
            (#"{"activity_id": "a", "alert": {"title": {"loc_key": "K", "args": []}, "body": "b"}}"#, "field 'alert.title.args': is not a known field (known: loc_args, loc_key)"),
            (#"{"activity_id": "a", "alert": {"title": {"loc_key": "K", "loc_args": [\#(Array(repeating: "\"x\"", count: 17).joined(separator: ","))]}, "body": "b"}}"#, "field 'alert.title.loc_args': has 17 arguments; at most 16"),
            (#"{"activity_id": "a", "contentState": {}}"#, "field 'contentState': is not a known field (known: activity_id, alert, app, attributes, attributes_type, audiences, broadcast, content_state, dismissal_date, event, id, input_push_channel, input_push_token, priority, relevance_score, replace_state, source, stale_date, storage_policy, timestamp)"),
            (#"{"activity_id": "a", "event": "start", "content_state": {}}"#, "field 'alert': is required for a start"),
            (#"{"activity_id": "a", "replace_state": true}"#, "field 'content_state': is required when replace_state is true"),
            (#"{"activity_id": "a", "source": {"topic": "t", "partition": -1, "offset": 0}}"#, "field 'source.partition': expected a partition number (0 or more)"),
        ])
    func badCommand(json: String, message: String) throws {
        let value = try JSONValue.parse(json)
        #expect(throws: FieldError.self) { try ActivityCommand(json: value) }
        do {
            _ = try ActivityCommand(json: value)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("bytes that are not JSON say so with the position")
    func notJSON() {
        do {
            _ = try ActivityCommand(bytes: Array("{oops".utf8))
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "not JSON: line 1, column 2: unexpected 'o', expected a string key in an object")
        }
    }

    @Test("a token registration decodes, defaults and round-trips")
    func registration() throws {
        let hex = String(repeating: "abcdef01", count: 8)
        let registration = try TokenRegistration(json: try JSONValue.parse(
            #"{"activity_id": "match-42", "token": "\#(hex.uppercased())", "expires_at": "2025-11-24T18:00:00Z"}"#))
        #expect(registration.token.hex == hex)
        #expect(registration.action == .register)
        #expect(registration.environment == .production)
        #expect(registration.isExpired(at: UnixTime(seconds: 1_764_007_200)))
        #expect(!registration.isExpired(at: UnixTime(seconds: 1_764_007_199)))
        #expect(registration.storeKey == "match-42\u{1F}\(hex)")
        #expect(try TokenRegistration(json: registration.json) == registration)
        #expect(throws: FieldError(field: "token", message: "device token has a non-hex character at position 1")) {
            try TokenRegistration(json: ["activity_id": "a", "token": "zz"])
        }
        #expect(throws: FieldError(field: "environment", message: #""staging" is not an environment (expected production or sandbox)"#)) {
            try TokenRegistration(json: ["activity_id": "a", "token": .string(hex), "environment": "staging"])
        }
        #expect(throws: FieldError(field: "token", message: "device token is 2 bytes, shorter than 32 (APNs tokens are at least 32 bytes)")) {
            try TokenRegistration(json: ["activity_id": "a", "token": "aa01"])
        }
    }

    @Test("an activity state snapshot round-trips")
    func stateRoundTrip() throws {
        let state = ActivityState(
            activityID: try ActivityID("match-42"), contentState: ["teamOneScore": 2, "period": "2nd"], version: 7,
            timestamp: UnixTime(seconds: 1_764_000_000), staleDate: UnixTime(seconds: 1_764_003_600),
            dismissalDate: UnixTime(seconds: 1_764_004_000), relevanceScore: 75, attributesType: "SportsActivityAttributes",
            attributes: ["gameName": "Superb Owl"], createdAt: UnixTime(seconds: 1_763_990_000),
            endedAt: UnixTime(seconds: 1_764_001_000), lastOffset: 1234)
        #expect(try ActivityState(bytes: state.json.serialized()) == state)
    }

    @Test("a dead letter round-trips")
    func deadLetterRoundTrip() throws {
        let letter = DeadLetter(
            reason: .payloadTooLarge, message: "payload for activity match-42 is 5000 bytes",
            activityID: try ActivityID("match-42"), token: try DeviceToken(hex: "abcd"), rule: "score-changed",
            origin: .init(topic: "sports.scores", partition: 1, offset: 9, key: "m42", value: "{}"),
            details: ["size": 5000, "limit": 4096], deadLetteredAt: UnixTime(seconds: 1_764_000_000))
        #expect(try DeadLetter(json: letter.json) == letter)
        #expect(letter.json["reason"] == "payload-too-large")
    }
}
