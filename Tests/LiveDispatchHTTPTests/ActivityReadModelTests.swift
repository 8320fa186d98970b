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

    @Test("tokens are keyed by activity and token; a tombstone removes one; pages are sorted")
    func tokens() {
        var model = ActivityReadModel(activityID: "a")
        for token in ["cc", "aa", "bb"] {
            model.tokenStoreRecord(key: bytes("a\u{1F}\(token)"), value: bytes(#"{"token": "\#(token)"}"#))
        }
        model.tokenStoreRecord(key: bytes("ab\u{1F}dd"), value: bytes(#"{"token": "dd"}"#))
        model.tokenStoreRecord(key: bytes("a\u{1F}bb"), value: nil)
        #expect(model.tokens.count == 2)
        #expect(model.tokenPage(offset: 0, limit: 1) == [.object(["token": "aa"])])
        #expect(model.tokenPage(offset: 1, limit: 10) == [.object(["token": "cc"])])
        #expect(model.tokenPage(offset: 5, limit: 10).isEmpty)
        #expect(model.isKnown && model.version == nil && !model.isEnded)
    }
}
