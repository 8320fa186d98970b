import Foundation
import HTTPTypes
@testable import LiveDispatchHTTP
import LiveDispatchCore
import TestSupport
import Testing

/// A request the key refuses is answered from its head, over a real socket,
/// before the client sends a byte of its body.
@Suite("Access before the body")
struct AccessBeforeBodyTests {
    static func head(_ path: String, authorization: String?, length: Int = 200_000, expect: Bool = true) -> String {
        "POST \(path) HTTP/1.1\r\nHost: localhost\r\n\(authorization.map { "Authorization: Bearer \($0)\r\n" } ?? "")"
            + "Content-Type: application/json\r\nContent-Length: \(length)\r\n\(expect ? "Expect: 100-continue\r\n" : "")\r\n"
    }

    @Test("Expect: 100-continue without a key gets its 401 at once, with no 100 Continue and no body sent")
    func expectWithoutKey() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let answer = try await rawRequest(port: port, Self.head("/v1/activities/m/update", authorization: nil), timeout: .seconds(5))
            #expect(answer.status == 401, "\(answer.head)")
            #expect(!answer.head.contains("100 Continue"))
            #expect(answer.head.lowercased().contains("connection: close"))
        }
        #expect(!server.handlersRan)
    }

    @Test("a key without the route's scope gets its 403 before the body; a wrong key its 401")
    func wrongScopeAndWrongKey() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let scope = try await rawRequest(port: port, Self.head("/v1/activities/m/update", authorization: "read-key"), timeout: .seconds(5))
            #expect(scope.status == 403, "\(scope.head)")
            let wrong = try await rawRequest(port: port, Self.head("/v1/tokens", authorization: "no-such-key", expect: false), timeout: .seconds(5))
            #expect(wrong.status == 401, "\(wrong.head)")
        }
        #expect(!server.handlersRan)
    }

    @Test("a keyless body is refused before it is sent, whatever its announced size")
    func keylessBody() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            // 255 KB announced, none sent: the answer cannot wait for it.
            let answer = try await rawRequest(port: port, Self.head("/v1/tokens", authorization: nil, length: 255_000, expect: false), timeout: .seconds(5))
            #expect(answer.status == 401, "\(answer.head)")
        }
        #expect(!server.handlersRan)
    }

    @Test("an authorized request still reaches its handler, body and all")
    func authorizedPasses() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let body = #"{"content_state":{"score":1}}"#
            let answer = try await rawRequest(
                port: port, Self.head("/v1/activities/m/update", authorization: "ingest-key", length: body.utf8.count, expect: false) + body)
            #expect(answer.status == 202 || answer.status == 200, "\(answer.head)\n\(answer.body)")
        }
        #expect(server.handlersRan)
    }

    @Test("the route's access is that of the template the path resolves to")
    func accessOfTemplates() {
        let methods = RouteMethods()
        methods.add(.get, "/v1/activities/{id}", access: .key(.read))
        methods.add(.post, "/v1/activities/{id}/update", access: .key(.ingest))
        methods.add(.get, "/v1/openapi.json", access: .open)
        methods.add(.get, "/v1/{any}", access: .key(.admin))
        #expect(methods.access(.post, "/v1/activities/m/update") == .key(.ingest))
        #expect(methods.access(.get, "/v1/activities/m") == .key(.read))
        #expect(methods.access(.get, "/v1/openapi.json") == .open)
        #expect(methods.access(.get, "/v1/other") == .key(.admin))
        #expect(methods.access(.delete, "/v1/activities/m") == nil)
        #expect(methods.access(.get, "/nowhere") == nil)
    }
}
