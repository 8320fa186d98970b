import Foundation
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import Testing

/// What `openapi.yaml` and the docs promise is what the code does.
@Suite("Documents match the code")
struct DocumentTruthTests {
    @Test("openapi.yaml's ActivityID takes what ActivityID takes: 1 to 256 characters of text without control characters")
    func activityIDPattern() throws {
        let document = try JSONValue.parse(OpenAPIDocument.json)
        let schema = try #require(document["components"]?["schemas"]?["ActivityID"])
        let pattern = try #require(schema["pattern"]?.stringValue)
        let regex = try NSRegularExpression(pattern: pattern)
        func matches(_ text: String) -> Bool {
            regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        }
        for accepted in [String(repeating: "a", count: 256), "m", "match superb-owl/2026"] {
            #expect(throws: Never.self) { try ActivityID(accepted) }
            #expect(matches(accepted), "\(accepted.count) characters")
        }
        for refused in [String(repeating: "a", count: 257), "", "line\nbreak"] {
            #expect(throws: (any Error).self) { try ActivityID(refused) }
            #expect(!matches(refused), "\(refused.count) characters")
        }
        #expect(schema["maxLength"]?.integerValue == 256)
    }

    @Test("docs/operations.md gives the expression limit the parser enforces")
    func expressionLimit() throws {
        let terms = (0...300).map { "a\($0)" }.joined(separator: " + ")
        let files = [("limit.yaml", "rules:\n  - name: long\n    topic: t\n    when: \(terms)\n    activity_id: \"'x'\"\n    content_state: {}\n")]
        let message: String
        do {
            _ = try RuleSet.compile(files: files)
            Issue.record("301 terms must be refused")
            return
        } catch {
            message = "\(error)"
        }
        let limit = try #require(message.firstRange(of: /limit (\d+)\)/).map { String(message[$0].dropFirst(6).dropLast()) })
        let operations = try String(contentsOf: InProcessServer.repository.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        #expect(operations.contains("at most \(limit) terms"), "the parser's limit is \(limit): \(message)")
        #expect(operations.contains("limit \(limit))"))
    }
}
