import LiveDispatchCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs an OTLP/HTTP protobuf body to one endpoint over HTTP/1.1, one
/// connection per export (an export a second at most keeps that cheap).
/// Plain HTTP only: a collector or agent beside the worker terminates TLS.
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
            let scheme = "http://"
            guard url.lowercased().hasPrefix(scheme) else { return nil }
            let rest = url.dropFirst(scheme.count)
            let authority = rest.prefix { $0 != "/" }
            let path = rest.dropFirst(authority.count)
            guard !authority.isEmpty, !authority.contains("@"), !path.contains("?"), !path.contains("#"),
                  path.allSatisfy({ $0.isASCII && !$0.isWhitespace })
            else { return nil }
            var host = Substring(authority)
            var port = 80
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
            "http://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
        }
    }

    /// Why an export failed.
    public struct ExportError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public let endpoint: Endpoint
    let timeout: TimeAmount
    let group: any EventLoopGroup

    public init(endpoint: Endpoint, timeout: Duration = .seconds(10), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.endpoint = endpoint
        self.timeout = .nanoseconds(max(0, timeout.nanoseconds))
        self.group = group
    }

    /// Posts `body` and returns the response's status code.
    public func post(_ body: [UInt8]) async throws -> Int {
        let eventLoop = group.next()
        let promise = eventLoop.makePromise(of: Int.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(StatusHandler(promise: promise))
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .get()
        } catch {
            promise.fail(error)
            throw ExportError(description: "cannot connect to \(endpoint): \(error)")
        }
        let deadline = eventLoop.scheduleTask(in: timeout) {
            promise.fail(ExportError(description: "no answer from \(endpoint) within \(Duration.nanoseconds(timeout.nanoseconds).seconds)s"))
        }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: endpoint.path)
        head.headers.add(name: "Host", value: endpoint.host)
        head.headers.add(name: "Content-Type", value: "application/x-protobuf")
        head.headers.add(name: "Content-Length", value: String(body.count))
        head.headers.add(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        return try await promise.futureResult.get()
    }
}

/// Fulfils the promise with the response's status once the response ended,
/// or fails it when the connection closes or errs first.
private final class StatusHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    let promise: EventLoopPromise<Int>
    var status: Int?

    init(promise: EventLoopPromise<Int>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = Int(head.status.code)
        case .body: break
        case .end:
            if let status { promise.succeed(status) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(OTLPHTTPClient.ExportError(description: "the connection closed before the answer ended"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
