@testable import LiveDispatchHTTP
import LiveDispatchCore
import Testing

@Suite("Activity read model")
struct ActivityReadModelTests {
    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("the last snapshot of the activity wins; other activities and a tombstone are honoured")
    func state() {
        var model = ActivityReadModel(activityID: "a")
        #expect(!model.isKnown)
        model.stateRecord(key: bytes("a"), value: bytes(#"{"activity_id": "a", "version": 1, "content_state": {}}"#))
        model.stateRecord(key: bytes("b"), value: bytes(#"{"activity_id": "b", "version": 9}"#))
        model.stateRecord(key: bytes("a"), value: bytes(#"{"activity_id": "a", "version": 2, "ended_at": 1770000000}"#))
        #expect(model.version == 2 && model.isEnded)
        model.stateRecord(key: bytes("a"), value: bytes("not json"))
        #expect(model.version == 2)
        model.stateRecord(key: bytes("a"), value: nil)
        #expect(model.state == nil && !model.isKnown)
    }

    @Test("tokens are keyed by activity and token; a tombstone removes one; pages are sorted and follow a cursor")
    func tokens() {
        var model = ActivityReadModel(activityID: "a")
        for token in ["cc", "aa", "bb", "ee"] {
            model.tokenStoreRecord(key: bytes("a\u{1F}\(token)"), value: bytes(#"{"token": "\#(token)"}"#))
        }
        model.tokenStoreRecord(key: bytes("ab\u{1F}dd"), value: bytes(#"{"token": "dd"}"#))
        model.tokenStoreRecord(key: bytes("a\u{1F}bb"), value: nil)
        #expect(model.tokens.count == 3)
        let first = model.tokenPage(after: nil, limit: 2)
        #expect(first.entries.map(\.token) == ["aa", "cc"] && first.next == "cc")
        // A token registered before the cursor does not shift the next page.
        model.tokenStoreRecord(key: bytes("a\u{1F}ab"), value: bytes(#"{"token": "ab"}"#))
        let second = model.tokenPage(after: first.next, limit: 2)
        #expect(second.entries.map(\.token) == ["ee"] && second.next == nil)
        #expect(model.tokenPage(after: "ff", limit: 10).entries.isEmpty)
        #expect(model.tokenPage(after: "b", limit: 10).entries.map(\.token) == ["cc", "ee"], "a cursor that is no token still pages")
        #expect(model.isKnown && model.version == nil && !model.isEnded)
    }

    @Test("each token's outcome: its recorded failure, or the snapshot's newest push for a token registered before it")
    func outcomes() {
        let healthy = String(repeating: "aa", count: 32)
        let broken = String(repeating: "bb", count: 32)
        let late = String(repeating: "cc", count: 32)
        var model = ActivityReadModel(activityID: "a")
        model.stateRecord(key: bytes("a"), value: bytes(#"""
            {"activity_id": "a", "version": 3, "content_state": {}, "pushes": [
              {"version": 2, "event": "update", "completed_at": 1000, "commands": 1, "delivered": 3, "failed": {}},
              {"version": 3, "event": "end", "completed_at": 1100, "commands": 1, "delivered": 2, "failed": {"BadDeviceToken": 1}}]}
            """#))
        model.tokenStoreRecord(key: bytes("a\u{1F}\(healthy)"), value: bytes(#"{"activity_id": "a", "token": "\#(healthy)", "registered_at": 900}"#))
        model.tokenStoreRecord(key: bytes("a\u{1F}\(broken)"), value: bytes(#"""
            {"activity_id": "a", "token": "\#(broken)", "registered_at": 900,
             "last_outcome": {"result": "failed", "reason": "BadDeviceToken", "version": 3, "kind": "end", "at": 1090}}
            """#))
        model.tokenStoreRecord(key: bytes("a\u{1F}\(late)"), value: bytes(#"{"activity_id": "a", "token": "\#(late)", "registered_at": 1200}"#))
        let entries = model.tokenPage(after: nil, limit: 10).entries
        #expect(entries.map(\.token) == [healthy, broken, late])
        #expect(entries[0].outcome == TokenOutcome(result: .delivered, version: 3, event: .end, at: UnixTime(seconds: 1100)) && entries[0].derived)
        #expect(entries[1].outcome == TokenOutcome(result: .failed, reason: "BadDeviceToken", version: 3, event: .end, at: UnixTime(seconds: 1090)))
        #expect(!entries[1].derived)
        #expect(entries[2].outcome == nil && !entries[2].derived, "registered after the newest push: no outcome yet")
    }
}
