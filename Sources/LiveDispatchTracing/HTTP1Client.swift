import LiveDispatchCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A small HTTP/1.1 client that POSTs a body to one endpoint, one connection
/// per request, with one deadline over the whole request (connect, TLS
/// handshake, answer). The OTLP exporter and the outcome webhooks send
/// through it.
public struct HTTP1Client: Sendable {
    /// Where requests go: `http://` or `https://`, host, port and path.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// Whether the connection is TLS (`https://`).
        public var isTLS: Bool
        public var host: String
        public var port: Int
        public var path: String

        public init(isTLS: Bool, host: String, port: Int, path: String) {
            self.isTLS = isTLS
            self.host = host
            self.port = port
            self.path = path
        }

        /// `http[s]://host[:port][/path]`; the port defaults to 80 (443 for
        /// `https`) and the path to `/`. Nil for anything else (another
        /// scheme, a bad port, user info, a query, a fragment).
        public init?(url: String) {
            let lowered = url.lowercased()
            let scheme: String
            if lowered.hasPrefix("http://") {
                scheme = "http://"
                isTLS = false
            } else if lowered.hasPrefix("https://") {
                scheme = "https://"
                isTLS = true
            } else {
                return nil
            }
            let rest = url.dropFirst(scheme.count)
            let authority = rest.prefix { $0 != "/" }
            let path = rest.dropFirst(authority.count)
            guard !authority.isEmpty, !authority.contains("@"), !path.contains("?"), !path.contains("#"),
                  path.allSatisfy({ $0.isASCII && !$0.isWhitespace })
            else { return nil }
            var host = Substring(authority)
            var port = isTLS ? 443 : 80
            if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
                guard let number = Int(authority[authority.index(after: colon)...]), (1...65535).contains(number) else { return nil }
                host = authority[..<colon]
                port = number
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-.:".contains($0)) }) else { return nil }
            self.host = String(host)
            self.port = port
            self.path = path.isEmpty ? "/" : String(path)
        }

        public var description: String {
            "\(isTLS ? "https" : "http")://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
        }

        /// Whether the host is an IP address (no name to check a certificate against, nor to send as SNI).
        var hostIsAddress: Bool {
            host.contains(":") || host.split(separator: ".", omittingEmptySubsequences: false).count == 4
                && host.allSatisfy { $0.isNumber || $0 == "." }
        }
    }

    /// The answer: its status and headers (the body is read and dropped).
    public struct Response: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
    }

    /// Why a request got no answer.
    public struct RequestError: Error, Sendable, CustomStringConvertible {
        public var description: String
        /// No full answer came within the request's timeout.
        public var isTimeout: Bool
    }

    public let endpoint: Endpoint
    let timeout: TimeAmount
    let group: any EventLoopGroup
    let tls: NIOSSLContext?

    /// A client for `endpoint`; `tls` is required for an `https` endpoint
    /// (``RequestError`` on every request otherwise) and unused for `http`.
    public init(endpoint: Endpoint, timeout: Duration = .seconds(10), tls: NIOSSLContext? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.endpoint = endpoint
        self.timeout = .nanoseconds(max(0, timeout.nanoseconds))
        self.tls = tls
        self.group = group
    }

    /// The TLS context of an `https` client: the system's trust roots plus
    /// the certificates of `extraRoots`.
    public static func tlsContext(extraRoots: [NIOSSLCertificate] = []) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if !extraRoots.isEmpty { configuration.additionalTrustRoots = [.certificates(extraRoots)] }
        return try NIOSSLContext(configuration: configuration)
    }

    /// POSTs `body` with `headers` (beside `Host`, `Content-Length` and
    /// `Connection: close`), and completes with the answer once it ended.
    public func send(_ body: [UInt8], headers: [(String, String)]) -> EventLoopFuture<Response> {
        let eventLoop = group.next()
        let promise = eventLoop.makePromise(of: Response.self)
        let endpoint = endpoint
        let seconds = Duration.nanoseconds(timeout.nanoseconds).seconds
        let deadline = eventLoop.scheduleTask(in: timeout) {
            promise.fail(RequestError(description: "no answer from \(endpoint) within \(seconds)s", isTimeout: true))
        }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        if endpoint.isTLS, tls == nil {
            promise.fail(RequestError(description: "no TLS configuration for \(endpoint)", isTimeout: false))
            return promise.futureResult
        }
        let tls = endpoint.isTLS ? tls : nil
        let serverName = endpoint.hostIsAddress ? nil : endpoint.host
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseHandler(promise: promise))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenComplete { result in
                switch result {
                case .failure(let error):
                    promise.fail(RequestError(description: "cannot connect to \(endpoint): \(error)", isTimeout: false))
                case .success(let channel):
                    promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
                    var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: endpoint.path)
                    head.headers.add(name: "Host", value: endpoint.host)
                    for (name, value) in headers { head.headers.add(name: name, value: value) }
                    head.headers.add(name: "Content-Length", value: String(body.count))
                    head.headers.add(name: "Connection", value: "close")
                    channel.write(HTTPClientRequestPart.head(head), promise: nil)
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                }
            }
        return promise.futureResult
    }

    /// POSTs `body` and returns the answer; throws ``RequestError`` when none came.
    public func post(_ body: [UInt8], headers: [(String, String)]) async throws -> Response {
        try await send(body, headers: headers).get()
    }
}

/// Fulfils the promise with the response's head once the response ended,
/// or fails it when the connection closes or errs first.
private final class ResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    let promise: EventLoopPromise<HTTP1Client.Response>
    var head: HTTPResponseHead?

    init(promise: EventLoopPromise<HTTP1Client.Response>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // An informational answer (100 Continue) is followed by the real one.
            if head.status.code >= 200 { self.head = head }
        case .body: break
        case .end:
            if let head { promise.succeed(.init(status: Int(clamping: head.status.code), headers: head.headers)) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTP1Client.RequestError(description: "the connection closed before the answer ended", isTimeout: false))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(HTTP1Client.RequestError(description: "\(error)", isTimeout: false))
        context.close(promise: nil)
    }
}
