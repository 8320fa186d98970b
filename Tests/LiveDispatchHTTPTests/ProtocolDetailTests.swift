import Foundation
import HTTPTypes
@testable import LiveDispatchHTTP
import LiveDispatchCore
import TestSupport
import Testing

/// What RFC 9110 and 9112 say of a request's head, over a real socket to the
/// worker's router: framing it cannot honour is refused, and a method a path
/// does not answer is told apart from a path that does not exist.
@Suite("HTTP protocol details")
struct ProtocolDetailTests {
    @Test("a second Host header is a 400, and nothing runs")
    func twoHosts() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let answer = try await rawRequest(port: port, "GET /v1/dead-letters HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nAuthorization: Bearer read-key\r\nConnection: close\r\n\r\n")
            #expect(answer.status == 400, "\(answer.head)")
            #expect(answer.body.contains("more than one Host"))
            let one = try await rawRequest(port: port, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(one.status == 200, "\(one.head)")
        }
        #expect(!server.handlersRan)
    }

    @Test("Transfer-Encoding other than chunked is a 501, and nothing is produced")
    func transferCodings() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let answer = try await rawRequest(port: port, """
                POST /v1/tokens HTTP/1.1\r
                Host: localhost\r
                Authorization: Bearer ingest-key\r
                Content-Type: application/json\r
                Transfer-Encoding: gzip, chunked\r
                Connection: close\r
                \r
                2\r
                {}\r
                0\r
                \r

                """)
            #expect(answer.status == 501, "\(answer.head)")
            #expect(answer.body.contains("not-implemented"))
        }
        #expect(server.producedRecords.isEmpty)
    }

    @Test("Content-Length 00 on a GET is no body: the read is answered, not refused 415")
    func zeroLengthSpelledTwice() async throws {
        let server = try InProcessServer(openReads: true)
        try await server.withListening { port in
            let answer = try await rawRequest(port: port, "GET /v1/dead-letters HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 00\r\nConnection: close\r\n\r\n")
            #expect(answer.status == 200, "\(answer.head) \(answer.body)")
        }
        #expect(AccessGate.hasBody(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/", headerFields: [.contentLength: "00"])) == false)
        #expect(AccessGate.hasBody(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/", headerFields: [.contentLength: "x"])) == true)
    }

    @Test("HEAD of a GET route is its head without a body; a wrong method is 405 with Allow; an unknown path stays 404")
    func methods() async throws {
        let server = try InProcessServer()
        try await server.withListening { port in
            let head = try await rawRequest(port: port, "HEAD /v1/openapi.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(head.status == 200, "\(head.head)")
            #expect(head.body.isEmpty)
            let length = head.head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            #expect(length == "Content-Length: \(OpenAPIDocument.json.utf8.count)", "\(head.head)")

            let wrong = try await rawRequest(port: port, "DELETE /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(wrong.status == 405, "\(wrong.head)")
            #expect(wrong.head.contains("Allow: GET, HEAD"), "\(wrong.head)")
            let post = try await rawRequest(port: port, "GET /v1/activities/m/update HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(post.status == 405, "\(post.head)")
            #expect(post.head.contains("Allow: POST"), "\(post.head)")

            let missing = try await rawRequest(port: port, "DELETE /nowhere HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(missing.status == 404, "\(missing.head)")
        }
        #expect(!server.handlersRan)
    }

    @Test("the console's printed address keeps an IPv6 host in brackets and reaches a wildcard on loopback")
    func consoleAddress() {
        #expect(WorkerHTTPServer.consoleAddress(listen: "[::1]:9464", port: 9464) == "http://[::1]:9464/")
        #expect(WorkerHTTPServer.consoleAddress(listen: "[::]:0", port: 40000) == "http://[::1]:40000/")
        #expect(WorkerHTTPServer.consoleAddress(listen: "0.0.0.0:9464", port: 9464) == "http://127.0.0.1:9464/")
        #expect(WorkerHTTPServer.consoleAddress(listen: "localhost:0", port: 41000) == "http://localhost:41000/")
    }

    @Test("the framing rules, without a socket")
    func framing() {
        #expect(RequestFraming.refusal([.contentLength: "12"]) == nil)
        #expect(RequestFraming.refusal([.contentLength: "12", .contentLength: "12"]) == nil)
        #expect(RequestFraming.refusal([.contentLength: "12", .contentLength: "13"])?.status == .badRequest)
        #expect(RequestFraming.refusal([.contentLength: "+5"])?.status == .badRequest)
        #expect(RequestFraming.refusal([.contentLength: "٣"])?.status == .badRequest)
        #expect(RequestFraming.refusal([.transferEncoding: "Chunked"]) == nil)
        #expect(RequestFraming.refusal([.transferEncoding: "chunked, chunked"])?.status == .notImplemented)
        #expect(RequestFraming.refusal([.transferEncoding: "identity"])?.status == .notImplemented)
    }
}
