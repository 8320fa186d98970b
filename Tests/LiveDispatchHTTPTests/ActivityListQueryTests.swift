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
}
