import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 request over plain TCP to a worker's HTTP listener, for
/// `livedispatch` and `livedispatch-bench`. (Foundation's URLSession would link libcurl into
/// the binary, and the container image carries no such library.)
public enum PlainHTTPClient {
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Sends `method` to `url` (`http://host:port/path?query`) with `headers`
    /// and an empty body; gives up after `timeout`.
    public static func send(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], timeout: Duration = .seconds(10)
    ) async throws -> Response {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host, !host.isEmpty else {
            throw Failure(description: "\(url.debugDescription) is not an http://host:port/… address")
        }
        let port = components.port ?? 80
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let path = target
        return try await withThrowingTaskGroup(of: Response.self) { group in
            group.addTask {
                try await exchange(method, host: host, port: port, target: path, headers: headers)
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw Failure(description: "no answer from \(url) within \(timeout)")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw Failure(description: "no answer from \(url)") }
            return first
        }
    }

    private static func exchange(
        _ method: HTTPMethod, host: String, port: Int, target: String, headers: [(String, String)]
    ) async throws -> Response {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: method, uri: target)
            head.headers.add(name: "Host", value: "\(host):\(port)")
            head.headers.add(name: "Connection", value: "close")
            if method == .POST || method == .PUT { head.headers.add(name: "Content-Length", value: "0") }
            for (name, value) in headers { head.headers.add(name: name, value: value) }
            // Head and end in one write: a server may answer and close as soon
            // as it has read the head of a request without a body.
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
            var response = Response(status: 0, body: [])
            for try await part in inbound {
                switch part {
                case .head(let head): response.status = Int(clamping: head.status.code)
                case .body(var buffer): response.body += buffer.readBytes(length: buffer.readableBytes) ?? []
                case .end: return response
                }
            }
            return response
        }
    }
}
