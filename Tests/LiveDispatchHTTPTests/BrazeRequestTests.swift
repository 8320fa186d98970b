@testable import LiveDispatchHTTP
import LiveDispatchCore
import TestSupport
import Testing

/// Braze's Live Activity bodies read into commands, without I/O.
@Suite("Braze-compatible requests")
struct BrazeRequestTests {
    static let apps = BrazeApps([
        .init(name: "scores", bundleID: "com.example.scores", brazeAppID: BrazeExamples.updateAppID),
        .init(name: "courier", bundleID: "com.example.courier", brazeAppID: BrazeExamples.startAppID),
    ])
    static let directory = AppDirectory([.init(name: "scores"), .init(name: "courier")])

    func command(_ kind: BrazeRequest.Kind, _ json: String, key: String? = nil) throws -> Result<ActivityCommand, BrazeRequest.Refusal> {
        BrazeRequest(kind: kind, body: try JSONValue.parse(json)).command(
            idempotencyKey: key, makeID: { "made-id" }, apps: Self.apps, directory: Self.directory)
    }

    /// The pointers of a refusal's problems, in order.
    func refused(_ kind: BrazeRequest.Kind, _ json: String) throws -> [String] {
        guard case .failure(let refusal) = try command(kind, json) else { return [] }
        return refusal.problems.map(\.pointer)
    }

    func message(_ kind: BrazeRequest.Kind, _ json: String, at pointer: String) throws -> String {
        guard case .failure(let refusal) = try command(kind, json) else { return "" }
        return refusal.problems.first { $0.pointer == pointer }?.message ?? ""
    }

    @Test("Braze's update example becomes an update of live-activity-1 with its state, dates and alert")
    func updateExample() throws {
        let made = try command(.update, BrazeExamples.update, key: "retry-1").get()
        #expect(made.event == .update)
        #expect(made.activityID.rawValue == "live-activity-1")
        #expect(made.id == "retry-1")
        #expect(made.contentState == ["teamOneScore": 2, "teamTwoScore": 4])
        #expect(made.dismissalDate == UnixTime(seconds: 1_677_542_400))
        #expect(made.staleDate == UnixTime(seconds: 1_677_516_949))
        #expect(made.alert == ActivityAlert(title: "Halftime", body: "It's halftime! Let's look at the scores"))
        #expect(made.priority == nil && made.audiences.isEmpty)
        #expect(made.app == "scores", "with several apps an update names its app_id's, which the dispatcher checks against the activity's")
        #expect(try command(.update, BrazeExamples.update).get().id == "made-id")
    }

    @Test("Braze's start example becomes a start of its attributes type, addressed to each external user id and the alias's audience key")
    func startExample() throws {
        let made = try command(.start, BrazeExamples.start).get()
        #expect(made.event == .start)
        #expect(made.activityID.rawValue == "football-chiefs-bills-2024-01-21")
        #expect(made.attributesType == "FootballActivity")
        #expect(made.attributes == ["team1Name": "Chiefs", "team2Name": "Bills"])
        #expect(made.contentState == ["teamOneScore": 0, "teamTwoScore": 0])
        #expect(made.staleDate == UnixTime(seconds: 1_705_942_549))
        #expect(made.alert == ActivityAlert(title: "Chiefs v. Bills", body: "The game is starting! Tune in soon!"))
        #expect(made.audiences.map(\.rawValue) == BrazeExamples.startAudiences)
        // With several apps the start names the one app_id stands for.
        #expect(made.app == "courier")
    }

    @Test("end_activity true makes an end; app_id matches a braze_app_id, an app name or a bundle id, and nothing else")
    func endAndAppID() throws {
        #expect(try command(.update, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "end_activity": true}"#).get().event == .end)
        #expect(try command(.update, #"{"app_id": "com.example.courier", "activity_id": "a", "content_state": {"x": 1}}"#).get().event == .update)
        #expect(try refused(.update, #"{"app_id": "other", "activity_id": "a", "content_state": {}}"#) == ["/app_id"])
        #expect(try message(.update, #"{"app_id": "other", "activity_id": "a", "content_state": {}}"#, at: "/app_id").contains("braze_app_id, name or bundle id"))
        #expect(try refused(.update, #"{"activity_id": "a", "content_state": {}}"#) == ["/app_id"])
        let none = BrazeRequest(kind: .update, body: try JSONValue.parse(#"{"app_id": "scores", "activity_id": "a", "content_state": {}}"#))
            .command(idempotencyKey: nil, makeID: { "id" }, apps: BrazeApps(), directory: .unchecked)
        #expect(throws: BrazeRequest.Refusal.self) { try none.get() }
    }

    @Test("segment_id, custom_audience and every unknown field are refused by name with the reason, all at once")
    func refusedFields() throws {
        let body = #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "activity_attributes_type": "T", "activity_attributes": {}, "notification": {"alert": {"title": "t", "body": "b"}}, "external_user_ids": ["u"], "segment_id": "s", "custom_audience": {"AND": []}, "colour": "red"}"#
        #expect(try refused(.start, body) == ["/colour", "/custom_audience", "/segment_id"])
        #expect(try message(.start, body, at: "/segment_id").contains("no Braze segments"))
        #expect(try message(.start, body, at: "/colour").contains("not a field of Braze's /messages/live_activity/start"))
        let update = #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "external_user_ids": ["u"]}"#
        #expect(try message(.update, update, at: "/external_user_ids").contains("update token"))
    }

    @Test("a start needs its attributes type, attributes, notification and recipients; at most 50 recipients; aliases are checked")
    func startNeeds() throws {
        #expect(try refused(.start, #"{"app_id": "scores", "activity_id": "a", "content_state": {}}"#)
            == ["/activity_attributes_type", "/activity_attributes", "/notification", "/external_user_ids"])
        let base = #""app_id": "scores", "activity_id": "a", "content_state": {}, "activity_attributes_type": "T", "activity_attributes": {}, "notification": {"alert": {"title": "t", "body": "b"}}"#
        let many = (0..<51).map { "\"u\($0)\"" }.joined(separator: ",")
        #expect(try refused(.start, "{\(base), \"external_user_ids\": [\(many)]}") == ["/external_user_ids"])
        #expect(try refused(.start, #"{\#(base), "user_aliases": [{"alias_name": "n"}]}"#) == ["/user_aliases/0"])
        #expect(try refused(.start, #"{\#(base), "external_user_ids": ["alias:x:y", 3]}"#) == ["/external_user_ids/0", "/external_user_ids/1"])
        // The same user twice is one audience.
        #expect(try command(.start, #"{\#(base), "external_user_ids": ["u", "u"]}"#).get().audiences.map(\.rawValue) == ["u"])
        // A mistake the commands topic's decoder finds is named by Braze's field.
        #expect(try refused(.start, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "activity_attributes_type": 7, "activity_attributes": {}, "notification": {"alert": {"title": "t", "body": "b"}}, "external_user_ids": ["u"]}"#)
            == ["/activity_attributes_type"])
    }

    @Test("two user aliases that differ only in where the colon falls are two audiences")
    func aliasKeysAreUnambiguous() throws {
        let base = #""app_id": "scores", "activity_id": "a", "content_state": {}, "activity_attributes_type": "T", "activity_attributes": {}, "notification": {"alert": {"title": "t", "body": "b"}}"#
        let aliases = #"[{"alias_label": "a:b", "alias_name": "c"}, {"alias_label": "a", "alias_name": "b:c"}, {"alias_label": "50%", "alias_name": "d"}]"#
        let made = try command(.start, "{\(base), \"user_aliases\": \(aliases)}").get()
        #expect(made.audiences.map(\.rawValue).sorted() == ["alias:50%25:d", "alias:a%3Ab:c", "alias:a:b:c"])
    }

    @Test("Braze's apple_push: localized keys, sound and content-available are honoured; a string alert, a badge or a half alert are refused")
    func notification() throws {
        let localized = try command(.update, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "notification": {"alert": {"title_loc_key": "GOAL", "title_loc_args": ["Ada"], "body": "2-1"}, "sound": "default", "content-available": true}}"#).get()
        #expect(localized.alert == ActivityAlert(title: .localized(key: "GOAL", arguments: ["Ada"]), body: "2-1", sound: "default"))
        #expect(localized.priority == .normal)
        let prefix = #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "notification": "#
        #expect(try refused(.update, prefix + #"{"alert": "Goal!"}}"#) == ["/notification/alert"])
        #expect(try refused(.update, prefix + #"{"alert": {"title": "t", "body": "b"}, "badge": 1}}"#) == ["/notification/badge"])
        #expect(try refused(.update, prefix + #"{"alert": {"title": "t"}}}"#) == ["/notification/alert/body"])
        #expect(try refused(.update, prefix + #"{"alert": {"title": "t", "body": "b", "action_loc_key": "k"}}}"#) == ["/notification/alert/action_loc_key"])
        #expect(try refused(.update, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "priority": 10, "notification": {"alert": {"title": "t", "body": "b"}, "content-available": true}}"#) == ["/priority"])
        #expect(try refused(.update, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "priority": 7}"#) == ["/priority"])
        #expect(try refused(.update, #"{"app_id": "scores", "activity_id": "a", "content_state": {}, "stale_date": "soon"}"#) == ["/stale_date"])
        #expect(try refused(.update, #"{"app_id": "scores", "activity_id": "a"}"#) == ["/content_state"])
        #expect(try refused(.update, #"[1]"#) == [""])
    }
}
