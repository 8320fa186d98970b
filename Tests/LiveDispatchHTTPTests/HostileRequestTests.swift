import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Kafka
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchWorker
import Logging
import LiveDispatchRules
import ServiceLifecycle
import TestSupport
import NIOCore
import Testing

/// Requests an attacker (or a careless client) sends, against the real
/// router in process: each is refused with a clear 4xx, nothing is lost or
/// corrupted, and nothing becomes a 500.
@Suite("Hostile requests")
struct HostileRequestTests {
    static let ingest = InProcessServer.bearer("ingest-key") + [.contentType: "application/json"]

    @Test("a duplicate key is refused over HTTP as the Kafka reader refuses it, and nothing is produced")
    func duplicateKeys() async throws {
        let server = try InProcessServer()
        let first = String(repeating: "ef", count: 32), second = String(repeating: "12", count: 32)
        try await server.application.test(.router) { client in
            let body = #"{"activity_id":"m","token":"\#(first)","token":"\#(second)"}"#
            try await client.execute(uri: "/v1/tokens", method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) { response in
                #expect(response.status == .badRequest)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["error"] == "invalid-json")
                #expect(answer["message"]?.stringValue?.contains("duplicate object key") == true)
            }
            // The same bytes are what the tokens topic's reader refuses too.
            #expect(throws: JSONParseError.self) { try JSONValue.parse(body) }
            let nested = #"{"content_state":{"a":1,"a":2}}"#
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: nested)) { response in
                #expect(response.status == .badRequest)
            }
        }
        #expect(server.producedRecords.isEmpty)
    }

    @Test("an update whose push is over APNs' 4 KB is refused at once with its size (413), not dead-lettered later")
    func oversizedContentState() async throws {
        let server = try InProcessServer()
        try await server.application.test(.router) { client in
            let big = String(repeating: "x", count: 5_000)
            let start = #"{"attributes_type":"Untyped","attributes":{"home":"Owls"},"alert":{"title":"Kick-off","body":"Now"},"#
            for event in ["start", "update", "end"] {
                let body = (event == "start" ? start : "{") + #""content_state":{"note":"\#(big)"}}"#
                try await client.execute(uri: "/v1/activities/m/\(event)", method: .post, headers: Self.ingest, body: ByteBuffer(string: body)) { response in
                    #expect(response.status == .contentTooLarge, "\(event)")
                    let answer = try JSONValue.parse(String(buffer: response.body))
                    #expect(answer["error"] == "payload-too-large", "\(event)")
                    #expect(answer["message"]?.stringValue?.contains("4096") == true, "\(event): \(answer)")
                }
            }
            // Just under the limit is accepted.
            let fits = #"{"content_state":{"note":"\#(String(repeating: "x", count: 3_000))"}}"#
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: fits)) { response in
                #expect(response.status == .accepted)
            }
        }
        #expect(server.producedRecords.count == 1)
    }

    @Test("an update that fits alone but not merged into the state this worker holds is refused with 413, naming the merge")
    func oversizedMergedState() async throws {
        let match = try ActivityID("m")
        var held = ActivityState(activityID: match, createdAt: UnixTime(seconds: 1_770_000_000))
        held.contentState = ["history": .string(String(repeating: "h", count: 3_000))]
        held.lastOffset = 41
        let state = held
        let server = try InProcessServer(currentState: { $0 == match ? state : nil })
        try await server.application.test(.router) { client in
            let more = #"{"content_state":{"more":"\#(String(repeating: "x", count: 1_500))"}}"#
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: more)) { response in
                #expect(response.status == .contentTooLarge)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["message"]?.stringValue?.contains("merged into the activity's current state") == true, "\(answer)")
            }
            // The same update for an activity this worker does not hold fits.
            try await client.execute(uri: "/v1/activities/other/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: more)) { response in
                #expect(response.status == .accepted)
            }
            // Removing the large field fits even merged.
            let smaller = #"{"content_state":{"history":null,"more":"\#(String(repeating: "x", count: 1_500))"}}"#
            try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: Self.ingest, body: ByteBuffer(string: smaller)) { response in
                #expect(response.status == .accepted)
            }
        }
        #expect(server.producedRecords.count == 2)
    }

    @Test("a dead letter cut to fit is not replayed (409 truncated); a whole one is, byte for byte")
    func truncatedDeadLetter() async throws {
        let original = #"{"match_id":"superb-owl-2026","note":"\#(String(repeating: "n", count: 600_000))"}"#
        let letter = DeadLetter(
            reason: .invalidJSON, message: "m",
            origin: .init(topic: "sports.scores", partition: 0, offset: 7, key: "superb-owl-2026", value: original),
            deadLetteredAt: UnixTime(seconds: 1_770_000_000))
        let cut = letter.serialized()
        #expect(cut.count < original.utf8.count)
        let small = DeadLetter(
            reason: .invalidJSON, message: "m",
            origin: .init(topic: "sports.scores", partition: 0, offset: 8, key: "k", value: #"{"match_id":"m"}"#),
            deadLetteredAt: UnixTime(seconds: 1_770_000_000))
        let records = [
            KafkaRecord(topic: "livedispatch.dead-letters", partition: 0, offset: 1, key: nil, value: cut),
            KafkaRecord(topic: "livedispatch.dead-letters", partition: 0, offset: 2, key: nil, value: small.serialized()),
        ]
        let server = try InProcessServer(records: ["livedispatch.dead-letters": records])
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/v1/dead-letters/0-1/replay", method: .post, headers: InProcessServer.bearer("admin-key")) { response in
                #expect(response.status == .conflict)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["error"] == "truncated")
                #expect(answer["message"]?.stringValue?.contains("sports.scores partition 0 offset 7") == true)
            }
            try await client.execute(uri: "/v1/dead-letters/0-2/replay", method: .post, headers: InProcessServer.bearer("admin-key")) { response in
                #expect(response.status == .accepted)
            }
        }
        let produced = server.producedRecords
        #expect(produced.count == 1)
        #expect(produced.first.map { String(decoding: $0.value, as: UTF8.self) } == #"{"match_id":"m"}"#)
    }

    @Test("a body with broken chunked framing is a 400, not a 500")
    func malformedChunks() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            for chunks in ["zz\r\n{}\r\n0\r\n\r\n", "-1\r\n{}\r\n0\r\n\r\n", "2\r\n{}XX0\r\n\r\n"] {
                let answer = try await rawRequest(port: port, """
                    POST /v1/tokens HTTP/1.1\r
                    Host: localhost\r
                    Authorization: Bearer ingest-key\r
                    Content-Type: application/json\r
                    Transfer-Encoding: chunked\r
                    \r
                    \(chunks)
                    """)
                #expect(answer.status == 400, "\(chunks.debugDescription): \(answer.head)")
            }
        }
        #expect(server.producedRecords.isEmpty)
    }

    @Test("admin.listen takes an IPv6 address in brackets; bound to [::1], keyless reads are open to a loopback Host")
    func ipv6Listen() async throws {
        let ports = AsyncStream.makeStream(of: Int.self)
        let emptyRules = try RuleSet.compile(files: [])
        let server = try WorkerHTTPServer(
            listen: "[::1]:0", configuration: WorkerConfiguration().http, health: .init(isReady: { true }, status: { "{}" }), exposition: nil,
            topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { _, _, _ in }, rules: { emptyRules }, readTopic: { _, _, _ in }, logger: Logger(label: "test"),
            onListening: { ports.continuation.yield($0) })
        let group = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.stream.makeAsyncIterator()
            let port = try #require(await iterator.next())
            for (path, status) in [("/healthz", 200), ("/v1/dead-letters", 200)] {
                let connection = try RawConnection(host: "::1", port: port)
                connection.send("GET \(path) HTTP/1.1\r\nHost: [::1]:\(port)\r\nConnection: close\r\n\r\n")
                let head = try await connection.waitForResponse(timeout: .seconds(10))
                #expect(head.hasPrefix("HTTP/1.1 \(status)"), "\(path): \(head.prefix(40))")
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
