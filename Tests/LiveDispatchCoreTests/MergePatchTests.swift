import LiveDispatchCore
import Testing

@Suite("JSON merge patch (RFC 7386)")
struct MergePatchTests {
    /// Every row of RFC 7386 Appendix A: original, patch, result.
    static let appendixA: [(String, String, String)] = [
        (#"{"a":"b"}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"b"}"#, #"{"b":"c"}"#, #"{"a":"b","b":"c"}"#),
        (#"{"a":"b"}"#, #"{"a":null}"#, #"{}"#),
        (#"{"a":"b","b":"c"}"#, #"{"a":null}"#, #"{"b":"c"}"#),
        (#"{"a":["b"]}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"c"}"#, #"{"a":["b"]}"#, #"{"a":["b"]}"#),
        (#"{"a":{"b":"c"}}"#, #"{"a":{"b":"d","c":null}}"#, #"{"a":{"b":"d"}}"#),
        (#"{"a":[{"b":"c"}]}"#, #"{"a":[1]}"#, #"{"a":[1]}"#),
        (#"["a","b"]"#, #"["c","d"]"#, #"["c","d"]"#),
        (#"{"a":"b"}"#, #"["c"]"#, #"["c"]"#),
        (#"{"a":"foo"}"#, #"null"#, #"null"#),
        (#"{"a":"foo"}"#, #""bar""#, #""bar""#),
        (#"{"e":null}"#, #"{"a":1}"#, #"{"a":1,"e":null}"#),
        (#"[1,2]"#, #"{"a":"b","c":null}"#, #"{"a":"b"}"#),
        (#"{}"#, #"{"a":{"bb":{"ccc":null}}}"#, #"{"a":{"bb":{}}}"#),
    ]

    @Test("Appendix A", arguments: 0..<appendixA.count)
    func appendixAExample(row: Int) throws {
        let (original, patch, expected) = Self.appendixA[row]
        let result = try JSONValue.parse(original).applyingMergePatch(try JSONValue.parse(patch))
        #expect(result == (try JSONValue.parse(expected)))
        #expect(result.serializedString() == expected)
    }

    @Test("the RFC's worked example in section 3")
    func sectionThreeExample() throws {
        let target = try JSONValue.parse(#"""
            {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
             "tags": ["example", "sample"], "content": "This will be unchanged"}
            """#)
        let patch = try JSONValue.parse(#"""
            {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": null}, "tags": ["example"]}
            """#)
        let expected = try JSONValue.parse(#"""
            {"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
             "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"}
            """#)
        #expect(target.applyingMergePatch(patch) == expected)
    }
}
