import Foundation
import LiveDispatchCore
import Testing

/// One of the reasons LiveDispatch parses JSON itself (docs/design.md, "What
/// we wrote ourselves, and why"): a document with a key twice means two
/// things, depending on the reader. Foundation accepts it and says nothing
/// (JSONSerialization keeps the last value, JSONDecoder the first);
/// LiveDispatch refuses the document and says which key, and where.
@Suite("Duplicate keys")
struct DuplicateKeyTests {
    static let twoActivities = #"{"activity_id":"match-1","event":"end","activity_id":"match-2"}"#

    @Test("Foundation accepts a key twice: JSONSerialization keeps the last value, JSONDecoder the first")
    func foundationTakesEither() throws {
        let data = Data(Self.twoActivities.utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["activity_id"] as? String == "match-2")

        struct Command: Decodable { var activity_id: String }
        #expect(try JSONDecoder().decode(Command.self, from: data).activity_id == "match-1")
    }

    @Test("the parser refuses a key twice, naming the key, its position and the object it is in")
    func parserRefuses() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Self.twoActivities) }
        do {
            _ = try JSONValue.parse(#"{"activity_id":"m","content_state":{"home":1,"away":0,"home":2}}"#)
            Issue.record("a content state with \"home\" twice was accepted")
        } catch {
            #expect(error.message == #"duplicate object key "home""#)
            #expect(error.field == "content_state")
            #expect((error.line, error.column) == (1, 55))
        }
    }

    @Test("a command with two activity ids is refused, not sent to the last one")
    func commandRefused() {
        do {
            let command = try ActivityCommand(bytes: Array(Self.twoActivities.utf8))
            Issue.record("read as a command for \(command.activityID)")
        } catch {
            #expect(error.description.contains(#"duplicate object key "activity_id""#), "\(error)")
        }
    }

    @Test("a token registration with two tokens is refused, not registered under the last one")
    func registrationRefused() {
        let text = #"{"activity_id":"m","token":"\#(String(repeating: "ab", count: 32))","token":"\#(String(repeating: "cd", count: 32))"}"#
        do {
            let registration = try TokenRegistration(bytes: Array(text.utf8))
            Issue.record("registered \(registration)")
        } catch {
            #expect(error.description.contains(#"duplicate object key "token""#), "\(error)")
        }
    }
}
