@testable import LiveDispatchHTTP
import Testing

@Suite("Activity list query")
struct ActivityListQueryTests {
    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("ids containing the text, latest snapshot each, tombstones removing, sorted")
    func matches() {
        var query = ActivityListQuery(containing: "match")
        query.consider(key: bytes("match-2"), value: bytes(#"{"version": 1}"#))
        query.consider(key: bytes("order-1"), value: bytes(#"{"version": 1}"#))
        query.consider(key: bytes("match-1"), value: bytes(#"{"version": 4, "ended_at": 1770000000}"#))
        query.consider(key: bytes("match-2"), value: bytes(#"{"version": 2}"#))
        query.consider(key: bytes("match-3"), value: bytes(#"{"version": 1}"#))
        query.consider(key: bytes("match-3"), value: nil)
        query.consider(key: nil, value: bytes("{}"))
        #expect(query.matched == 2)
        #expect(query.first(10) == [
            .init(activityID: "match-1", version: 4, ended: true), .init(activityID: "match-2", version: 2, ended: false),
        ])
        #expect(query.first(1).map(\.activityID) == ["match-1"])
    }

    @Test("beyond the cap new ids are not kept and the answer says so")
    func truncated() {
        var query = ActivityListQuery(containing: nil, maxKept: 2)
        for id in ["a", "b", "c"] { query.consider(key: bytes(id), value: bytes("{}")) }
        query.consider(key: bytes("a"), value: bytes(#"{"version": 7}"#))
        #expect(query.truncated && query.matched == 2)
        #expect(query.first(5).first?.version == 7)
    }

    @Test("each listed activity's Lock Screen, last push and registered tokens")
    func lockScreenAndTokens() {
        var query = ActivityListQuery(containing: nil)
        query.consider(key: bytes("match-1"), value: bytes(#"""
            {"activity_id": "match-1", "version": 2, "created_at": 1764000000, "attributes_type": "SportsActivityAttributes",
             "attributes": {"teamOneName": "Owls", "teamTwoName": "Hawks"}, "content_state": {"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "minute": 12},
             "pushes": [{"version": 1, "event": "update", "completed_at": 1764000001, "commands": 1, "delivered": 2, "failed": {}},
                        {"version": 2, "event": "update", "completed_at": 1764000002, "commands": 3, "delivered": 1, "failed": {"Unregistered": 1}}]}
            """#))
        query.consider(key: bytes("odd"), value: bytes(#"{"version": 1}"#))
        query.countTokens(of: query.first(1).map(\.activityID))
        for (key, value) in [("match-1\u{1F}aa", "{}"), ("match-1\u{1F}bb", "{}"), ("match-1\u{1F}cc", "{}"), ("odd\u{1F}aa", "{}"), ("no-separator", "{}")] {
            query.tokenStoreRecord(key: bytes(key), value: bytes(value))
        }
        query.tokenStoreRecord(key: bytes("match-1\u{1F}bb"), value: nil)
        let listed = query.first(2)
        #expect(listed.first?.lockScreen == "Owls 1 – 0 Hawks · first half 12'")
        #expect(listed.first?.lastPush?.version == 2 && listed.first?.lastPush?.failed == ["Unregistered": 1])
        #expect(query.tokenCount(of: "match-1") == 2)
        #expect(listed.last?.lockScreen == nil, "a snapshot that is not a state has no Lock Screen")
        #expect(query.tokenCount(of: "odd") == nil, "only the listed activities are counted")
    }
}
