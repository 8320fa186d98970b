import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import LiveDispatchHTTP
import LiveDispatchCore
import NIOCore
import Testing

/// Numbers in request bodies reach Kafka with every digit, or the request
/// is refused naming the number's field; none is rounded on the way.
@Suite("Exact numbers over HTTP")
struct ExactNumberRequestTests {
    static let ingest = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]

    @Test(
        "a number past Int64 or below a double's least is refused 400 with its pointer, and nothing is produced",
        arguments: ["18446744073709551616", "9223372036854775809", "1e-400"])
    func refused(number: String) async throws {
        let server = try InProcessServer()
        try await server.application.test(.router) { client in
            let requests = [
                ("/v1/activities/m/update", #"{"content_state":{"score":{"home":\#(number)}}}"#, "/content_state/score/home"),
                ("/v1/activities/m/update", #"{"content_state":{"goals":[1,\#(number)]}}"#, "/content_state/goals/1"),
                ("/v1/activities/m/update", #"{"content_state":{},"relevance_score":\#(number)}"#, "/relevance_score"),
                ("/messages/live_activity/update",
                 #"{"app_id":"a","activity_id":"m","content_state":{"home":\#(number)},"end_activity":false}"#, "/content_state/home"),
            ]
            for (uri, body, pointer) in requests {
                try await client.execute(uri: uri, method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) { response in
                    #expect(response.status == .badRequest, "\(uri) \(body)")
                    let answer = try JSONValue.parse(String(buffer: response.body))
                    #expect(answer["error"] == "invalid-request", "\(answer)")
                    let problem = answer["problems"]?.arrayValue?.first
                    #expect(problem?["pointer"]?.stringValue == pointer, "\(answer)")
                    #expect(problem?["message"]?.stringValue?.contains(number) == true, "\(answer)")
                    #expect(answer["message"]?.stringValue?.contains(pointer) == true, "\(answer)")
                }
            }
        }
        #expect(server.producedRecords.isEmpty)
    }

    @Test("numbers at the edges of what is carried reach the commands topic as they were sent")
    func kept() async throws {
        let server = try InProcessServer()
        let state = #"{"max":9223372036854775807,"min":-9223372036854775808,"two64":1.8446744073709552e19,"least":5e-324,"# +
            #""sum":0.30000000000000004,"big":1e22,"tenth":0.1,"long":123456789.12345679,"list":[1.5,-2.25e-7]}"#
        try await server.application.test(.router) { client in
            let body = #"{"content_state":\#(state)}"#
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) { response in
                #expect(response.status == .accepted, "\(String(buffer: response.body))")
            }
        }
        let record = try #require(server.producedRecords.first)
        let sent = try JSONValue.parse(state)
        let produced = try #require(try ActivityCommand(bytes: record.value).contentState)
        for (key, value) in try #require(sent.objectValue) {
            #expect(produced[key]?.serializedString() == value.serializedString(), "\(key)")
        }
    }

    @Test("random numbers the parser accepts keep their value through the generated types' decoding and the command")
    func randomized() throws {
        var random = SplitMix64(seed: 0x45_07_0)
        for _ in 0..<2_000 {
            var members: [String] = []
            for field in 0..<8 {
                var number = "0"
                // Drawn again until the parser accepts it (a third of the decimals have digits a double does not keep).
                repeat {
                    switch random.next() % 3 {
                    case 0: number = String(Int64(bitPattern: random.next()) >> (random.next() % 64))
                    case 1:
                        let double = Double(bitPattern: random.next())
                        number = double.isFinite ? "\(double)" : "0.5"
                    default: number = "\(random.next() % 1_000_000).\(random.next() % 1_000_000_000_000)e\(Int(random.next() % 40) - 20)"
                    }
                } while (try? JSONValue.parse(number)) == nil
                members.append(#""f\#(field)":\#(number)"#)
            }
            let state = "{" + members.joined(separator: ",") + "}"
            let sent = try JSONValue.parse(state)
            let body = try JSONDecoder().decode(Components.Schemas.UpdateRequest.self, from: Data(#"{"content_state":\#(state)}"#.utf8))
            let made = try WorkerAPI.command(.update, activity: "m", idempotencyKey: nil, body: body, makeID: { "id" }).get()
            for (key, value) in try #require(sent.objectValue) {
                #expect(made.contentState?[key]?.numberValue == value.numberValue, "\(key) in \(state)")
            }
        }
    }
}
