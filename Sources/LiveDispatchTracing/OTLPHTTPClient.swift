import LiveDispatchCore
import NIOCore
import NIOPosix

/// POSTs an OTLP/HTTP protobuf body to one endpoint over HTTP/1.1 (an
/// ``HTTP1Client``), one connection per export (an export a second at most
/// keeps that cheap). Plain HTTP only: a collector or agent beside the
/// worker terminates TLS.
public struct OTLPHTTPClient: Sendable {
    /// Where spans are posted.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var path: String

        /// `http://host[:port][/path]`; the port defaults to 80 and the path
        /// to `/`. Nil for anything else (another scheme, a bad port, user
        /// info, a query).
        public init?(url: String) {
            guard let endpoint = HTTP1Client.Endpoint(url: url), !endpoint.isTLS else { return nil }
            host = endpoint.host
            port = endpoint.port
            path = endpoint.path
        }

        public var description: String {
            "http://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
        }
    }

    /// Why an export failed.
    public struct ExportError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public let endpoint: Endpoint
    let client: HTTP1Client

    public init(endpoint: Endpoint, timeout: Duration = .seconds(10), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.endpoint = endpoint
        client = HTTP1Client(
            endpoint: HTTP1Client.Endpoint(isTLS: false, host: endpoint.host, port: endpoint.port, path: endpoint.path), timeout: timeout,
            group: group)
    }

    /// Posts `body` and returns the response's status code.
    public func post(_ body: [UInt8]) async throws -> Int {
        do {
            return try await client.post(body, headers: [("Content-Type", "application/x-protobuf")]).status
        } catch {
            throw ExportError(description: "\(error)")
        }
    }
}
