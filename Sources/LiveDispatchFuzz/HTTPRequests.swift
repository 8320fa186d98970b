import HTTPTypes
@_spi(Fuzzing) import LiveDispatchHTTP
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// The `http` target's input: bytes as a client would send them on a
/// connection, parsed by the server's own HTTP/1.1 decoder (NIO's) and
/// converted to the requests Hummingbird routes.
enum HTTPRequests {
    /// The server, built once: routing keeps no state between requests but the rate limiter's.
    static let harness = try? HTTPFuzzHarness()

    /// Each whole request in `bytes`; parsing stops at the first error.
    static func parse(_ bytes: [UInt8]) -> [(HTTPRequest, [UInt8])] {
        let channel = EmbeddedChannel()
        do {
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        } catch {
            return []
        }
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        var requests: [(HTTPRequest, [UInt8])] = []
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        } catch {
            // A parse error: the requests before it still count.
        }
        var head: HTTPRequest?
        var body: [UInt8] = []
        while let part = try? channel.readInbound(as: HTTPRequestPart.self) {
            switch part {
            case .head(let request):
                head = request
                body = []
            case .body(let buffer):
                body += Array(buffer: buffer)
            case .end:
                if let head { requests.append((head, body)) }
                head = nil
            }
        }
        return requests
    }

    /// Routes each request and checks what must hold for any bytes: no 500,
    /// and a handler behind a key runs only for a request that carries one
    /// of the server's keys, on a path in its one canonical spelling.
    static func check(_ bytes: [UInt8]) {
        guard let harness else { preconditionFailure("the HTTP harness did not build") }
        for (head, body) in parse(bytes).prefix(8) {
            let (status, ran) = harness.route(head, body: body)
            precondition(status != 500, "\(head.method) \(head.path ?? "") answered 500")
            guard ran else { continue }
            let authorization = head.headerFields[.authorization] ?? ""
            let parts = authorization.split(separator: " ", maxSplits: 1)
            precondition(
                parts.count == 2 && parts[0].lowercased() == "bearer" && HTTPFuzzHarness.secrets[String(parts[1])] != nil,
                "\(head.method) \(head.path ?? "") ran a guarded handler without a key: Authorization \(authorization.debugDescription)")
            precondition(HTTPFuzzHarness.isCanonical(head.path ?? ""), "a guarded handler ran for the non-canonical path \(head.path ?? "")")
        }
    }
}
