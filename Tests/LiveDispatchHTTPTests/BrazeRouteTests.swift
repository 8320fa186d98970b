import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import LiveDispatchHTTP
import LiveDispatchCore
import NIOCore
import TestSupport
import Testing

/// Braze's Live Activity routes on the worker's real router, in process:
/// Braze's example bodies are accepted with Braze's answer and produced as
/// commands; refusals come in Braze's shape and produce nothing.
@Suite("Braze-compatible routes")
struct BrazeRouteTests {
    static let ingest = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]

    static func ingest(idempotencyKey: String) throws -> HTTPFields {
        var headers = ingest
        headers[try #require(HTTPField.Name("Idempotency-Key"))] = idempotencyKey
        return headers
    }

    /// A deployment of one app whose braze_app_id is the app id of Braze's update example.
    func server() throws -> InProcessServer {
        try InProcessServer(
            apps: AppDirectory([.init(name: "default")]),
            brazeApps: BrazeApps([.init(name: "default", bundleID: "com.example.livedispatch", brazeAppID: BrazeExamples.updateAppID)]))
    }

    func post(_ server: InProcessServer, _ route: String, _ body: String, headers: HTTPFields = ingest) async throws -> (HTTPResponse.Status, JSONValue) {
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/messages/live_activity/\(route)", method: .post, headers: headers, body: ByteBuffer(string: body)) { response in
                (response.status, (try? JSONValue.parse(String(buffer: response.body))) ?? .null)
            }
        }
    }

    @Test("Braze's update example is answered 201 {\"message\":\"success\"} and produced to commands under its activity id")
    func updateExample() async throws {
        let server = try server()
        let (status, answer) = try await post(server, "update", BrazeExamples.update, headers: try Self.ingest(idempotencyKey: "halftime-1"))
        #expect(status == .created)
        #expect(answer == ["message": "success"])
        let record = try #require(server.producedRecords.first)
        #expect(record.topic == "livedispatch.commands")
        #expect(record.key == Array("live-activity-1".utf8))
        let sent = try ActivityCommand(bytes: record.value)
        #expect(sent.event == .update && sent.id == "halftime-1")
        #expect(sent.contentState == ["teamOneScore": 2, "teamTwoScore": 4])
        #expect(sent.alert?.title == "Halftime")
    }

    @Test("Braze's start example is produced as a start to the audiences of its users, its app_id resolved to the configured app")
    func startExample() async throws {
        let server = try InProcessServer(
            apps: AppDirectory([.init(name: "default")]),
            brazeApps: BrazeApps([.init(name: "default", bundleID: "com.example.livedispatch", brazeAppID: BrazeExamples.startAppID)]))
        let (status, answer) = try await post(server, "start", BrazeExamples.start)
        #expect(status == .created)
        #expect(answer == ["message": "success"])
        let sent = try ActivityCommand(bytes: try #require(server.producedRecords.first).value)
        #expect(sent.event == .start && sent.activityID.rawValue == "football-chiefs-bills-2024-01-21")
        #expect(sent.audiences.map(\.rawValue) == BrazeExamples.startAudiences)
        #expect(sent.attributesType == "FootballActivity")
        #expect(sent.app == nil, "a deployment of one app: records name none")
    }

    @Test("a refused body is answered 400 in Braze's shape, each field in errors, and nothing is produced")
    func refusal() async throws {
        let server = try server()
        let body = #"{"app_id": "nope", "activity_id": "a", "content_state": {}, "segment_id": "s", "activity_attributes_type": "T", "activity_attributes": {}, "notification": {"alert": {"title": "t", "body": "b"}}, "external_user_ids": ["u"]}"#
        let (status, answer) = try await post(server, "start", body)
        #expect(status == .badRequest)
        #expect(answer["message"]?.stringValue?.contains("/segment_id") == true, "\(answer)")
        let pointers = answer["errors"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue }
        #expect(pointers == ["/segment_id", "/app_id"])
        #expect(answer["error"] == nil, "Braze's shape: message and errors")
        let (badKey, keyAnswer) = try await post(server, "update", BrazeExamples.update, headers: try Self.ingest(idempotencyKey: "two words"))
        #expect(badKey == .badRequest)
        #expect(keyAnswer["errors"]?.arrayValue?.first?["pointer"] == "#/parameters/Idempotency-Key")
        #expect(server.producedRecords.isEmpty)
    }

    @Test("an update whose push is over APNs' limit is refused by the command checks with 413 in Braze's shape")
    func payloadTooLarge() async throws {
        let server = try server()
        let big = String(repeating: "x", count: 5_000)
        let body = #"{"app_id": "default", "activity_id": "a", "content_state": {"note": "\#(big)"}}"#
        let (status, answer) = try await post(server, "update", body)
        #expect(status == .contentTooLarge)
        #expect(answer["message"]?.stringValue?.contains("4096") == true, "\(answer)")
        #expect(answer["errors"]?.arrayValue?.first?["pointer"] == "/content_state")
        #expect(server.producedRecords.isEmpty)
    }

    @Test("the routes need a key with the ingest scope, like every write route")
    func access() async throws {
        let server = try server()
        let json: HTTPFields = [.contentType: "application/json"]
        #expect(try await post(server, "update", BrazeExamples.update, headers: json).0 == .unauthorized)
        #expect(try await post(server, "start", BrazeExamples.start, headers: InProcessServer.bearer("read-key") + json).0 == .forbidden)
        #expect(server.producedRecords.isEmpty)
    }
}
