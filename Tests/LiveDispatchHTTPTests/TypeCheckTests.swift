import Foundation
import HTTPTypes
import HummingbirdTesting
import LiveDispatchCore
import NIOCore
import Testing

/// The write routes refuse, with 422 and the path of the first mismatch, a
/// command that does not fit its activity's type (`Config/rules`'
/// `activity_types`), and produce nothing.
@Suite("Type checks of the write routes")
struct TypeCheckTests {
    static let ingest = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]
    static let match = "match-types"

    /// The match as the worker that owns its partition holds it.
    static func current() throws -> ActivityState {
        var state = ActivityState(activityID: try ActivityID(match), createdAt: UnixTime(seconds: 1_764_000_000))
        state.contentState = ["teamOneScore": 1, "teamTwoScore": 0, "period": "first_half"]
        state.attributesType = "SportsActivityAttributes"
        state.lastOffset = 3
        return state
    }

    func post(
        _ server: InProcessServer, _ event: String, _ body: String, activity: String = match
    ) async throws -> (HTTPResponse.Status, JSONValue) {
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/v1/activities/\(activity)/\(event)", method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) {
                ($0.status, try JSONValue.parse(String(buffer: $0.body)))
            }
        }
    }

    func expectRefused(
        _ answer: (HTTPResponse.Status, JSONValue), code: String, pointer: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(answer.0 == .unprocessableContent, "\(answer.1)", sourceLocation: sourceLocation)
        #expect(answer.1["error"]?.stringValue == code, "\(answer.1)", sourceLocation: sourceLocation)
        #expect(answer.1["problems"]?.arrayValue?.first?["pointer"]?.stringValue == pointer, "\(answer.1)", sourceLocation: sourceLocation)
        #expect(answer.1["message"]?.stringValue?.contains("SportsActivityAttributes") == true, sourceLocation: sourceLocation)
    }

    @Test("an update merged into the state this worker holds is checked whole: a misspelled field, a wrong type, a required field removed")
    func mergedUpdate() async throws {
        let current = try Self.current()
        let server = try InProcessServer(currentState: { $0 == current.activityID ? current : nil })
        expectRefused(try await post(server, "update", #"{"content_state": {"teamOneScroe": 2}}"#), code: "content-state-mismatch", pointer: "/content_state/teamOneScroe")
        expectRefused(try await post(server, "update", #"{"content_state": {"teamOneScore": "2"}}"#), code: "content-state-mismatch", pointer: "/content_state/teamOneScore")
        expectRefused(try await post(server, "end", #"{"content_state": {"period": null}}"#), code: "content-state-mismatch", pointer: "/content_state/period")
        expectRefused(
            try await post(server, "update", #"{"attributes_type": "DeliveryActivityAttributes", "content_state": {"teamOneScore": 2}}"#),
            code: "attributes-mismatch", pointer: "/attributes_type")
        #expect(server.producedRecords.isEmpty, "nothing was produced")

        let fits = try await post(server, "update", #"{"content_state": {"teamOneScore": 2, "minute": 30}}"#)
        #expect(fits.0 == .accepted, "\(fits.1)")
        #expect(server.producedRecords.count == 1)
    }

    @Test("a start is checked whole, attributes first; an update that names its type is checked in the fields it names")
    func startAndNamedUpdate() async throws {
        let server = try InProcessServer()
        let alert = #""alert": {"title": "Kick-off", "body": "Owls v Hawks"}"#
        let attributes = #""attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"}"#
        expectRefused(
            try await post(server, "start", #"{"attributes_type": "SportsActivityAttributes", "attributes": {"gameName": "Cup", "teamOneName": "Owls"}, \#(alert), "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}}"#),
            code: "attributes-mismatch", pointer: "/attributes/teamTwoName")
        expectRefused(
            try await post(server, "start", #"{\#(attributes), \#(alert), "content_state": {"teamOneScore": 0, "teamTwoScore": 0}}"#),
            code: "content-state-mismatch", pointer: "/content_state/period")
        expectRefused(
            try await post(server, "update", #"{"attributes_type": "SportsActivityAttributes", "content_state": {"minute": 12.5}}"#),
            code: "content-state-mismatch", pointer: "/content_state/minute")
        #expect(server.producedRecords.isEmpty)

        #expect(try await post(server, "start", #"{\#(attributes), \#(alert), "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}}"#).0 == .accepted)
        // The start accepted here is the state the next update is judged on, whole.
        expectRefused(
            try await post(server, "update", #"{"content_state": {"teamOneScroe": 1}}"#), code: "content-state-mismatch", pointer: "/content_state/teamOneScroe")
        // The state is not known here and the update names no type: the
        // worker that holds the activity checks it.
        #expect(try await post(server, "update", #"{"content_state": {"teamOneScroe": 1}}"#, activity: "match-elsewhere").0 == .accepted)
        #expect(server.producedRecords.count == 2)
    }
}
