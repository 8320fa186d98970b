import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import NIOCore
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
        for refused in [String(repeating: "a", count: 257), "", "line\nbreak", "next\u{85}line", "fake\u{2028}line", "bidi\u{202E}text"] {
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

    /// One refusal of a write route: the request and the `error` code it is answered with.
    struct Refusal: Sendable, CustomTestStringConvertible {
        var path: String
        var uri: String
        var body: String
        var status: HTTPResponse.Status
        /// The `error` of an `Error` body; nil for Braze's answer shape.
        var code: String?
        var testDescription: String { "\(status.code) \(code ?? "") on \(uri)" }
    }

    static let refusals: [Refusal] = {
        let half = String(repeating: "x", count: 2_500)
        let token = String(repeating: "ab", count: 32)
        return [
            Refusal(path: "/v1/activities/{activity_id}/end", uri: "/v1/activities/ghost/end", body: #"{"content_state": {}}"#,
                    status: .notFound, code: "no-activity"),
            Refusal(path: "/messages/live_activity/update", uri: "/messages/live_activity/update",
                    body: #"{"app_id": "scores", "activity_id": "ghost", "content_state": {}, "end_activity": true}"#,
                    status: .notFound, code: "no-activity"),
            Refusal(path: "/v1/tokens", uri: "/v1/tokens",
                    body: #"{"kind": "push_to_start", "app": "scores", "audience": "a", "attributes_type": "Undeclared", "token": "\#(token)"}"#,
                    status: .unprocessableContent, code: "undeclared-type"),
            Refusal(path: "/v1/activities/{activity_id}/update", uri: "/v1/activities/match-1/update",
                    body: #"{"app": "deliveries", "content_state": {"teamOneScore": 1}}"#, status: .unprocessableContent, code: "app-mismatch"),
            Refusal(path: "/messages/live_activity/update", uri: "/messages/live_activity/update",
                    body: #"{"app_id": "deliveries", "activity_id": "match-1", "content_state": {"teamOneScore": 1}}"#,
                    status: .unprocessableContent, code: nil),
            Refusal(path: "/v1/activities/{activity_id}/update", uri: "/v1/activities/big/update",
                    body: #"{"content_state": {"one": "\#(half)", "two": "\#(half)"}}"#, status: .contentTooLarge, code: "payload-too-large"),
        ]
    }()

    @Test("each refusal of a write route is a status openapi.yaml lists for it, with a body its schema requires", arguments: refusals)
    func refusalsAreListed(_ refusal: Refusal) async throws {
        var state = ActivityState(activityID: try ActivityID("match-1"), createdAt: UnixTime(seconds: 1_764_000_000))
        state.contentState = ["teamOneScore": 0]
        state.app = "scores"
        let server = try InProcessServer(
            currentState: { [state] in $0 == state.activityID ? state : nil },
            apps: AppDirectory([.init(name: "scores"), .init(name: "deliveries")]),
            brazeApps: BrazeApps([
                .init(name: "scores", bundleID: "com.example.scores", brazeAppID: "scores"),
                .init(name: "deliveries", bundleID: "com.example.deliveries", brazeAppID: "deliveries"),
            ]),
            hasNoState: { $0.rawValue == "ghost" })
        let headers = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]
        let (status, answer) = try await server.application.test(.router) { client in
            try await client.execute(uri: refusal.uri, method: .post, headers: headers, body: ByteBuffer(string: refusal.body)) { response in
                (response.status, (try? JSONValue.parse(String(buffer: response.body))) ?? .null)
            }
        }
        try #require(status == refusal.status, "\(answer)")
        if let code = refusal.code { #expect(answer["error"]?.stringValue == code, "\(answer)") }

        let document = try JSONValue.parse(OpenAPIDocument.json)
        func resolved(_ value: JSONValue?) -> JSONValue? {
            guard let reference = value?["$ref"]?.stringValue else { return value }
            return reference.dropFirst(2).split(separator: "/").reduce(document as JSONValue?) { $0?[String($1)] }
        }
        let listed = resolved(document["paths"]?[refusal.path]?["post"]?["responses"]?[String(refusal.status.code)])
        let response = try #require(listed, "openapi.yaml lists no \(refusal.status.code) for POST \(refusal.path)")
        let schema = try #require(resolved(response["content"]?["application/json"]?["schema"]))
        for field in schema["required"]?.arrayValue ?? [] {
            let name = try #require(field.stringValue)
            #expect(answer[name] != nil, "the \(refusal.status.code) body lacks \(name), which its schema requires: \(answer)")
        }
        #expect(server.producedRecords.isEmpty)
    }
}
