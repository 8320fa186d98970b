import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The admin HTTP endpoint for SREs: `GET /healthz` (the process runs),
/// `GET /readyz` (joined both consumer groups and every owned partition
/// restored, or a standby that owns none; 503 while not),
/// `GET /metrics` (Prometheus text) and `GET /status` (the dispatcher's
/// phase — joining, restoring, ready, standby or draining — partitions owned,
/// records in progress, paused or not).
public final class AdminEndpoint: Service, Sendable {
    /// Produces the Prometheus exposition text.
    public typealias Exposition = @Sendable () -> [UInt8]

    let host: String
    let port: Int
    let dispatcher: Dispatcher
    let exposition: Exposition?
    let logger: Logger

    public init(listen: String, dispatcher: Dispatcher, exposition: Exposition?, logger: Logger) throws {
        let parts = listen.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]), (0...65535).contains(port) else {
            throw WorkerStartError("admin.listen: expected host:port, got \(listen.debugDescription)")
        }
        self.host = String(parts[0])
        self.port = port
        self.dispatcher = dispatcher
        self.exposition = exposition
        self.logger = logger
    }

    public func run() async throws {
        let respond: @Sendable (String) -> AdminResponse = { [dispatcher, exposition] path in
            switch path {
            case "/healthz":
                return AdminResponse(status: .ok, contentType: "text/plain", body: Array("ok\n".utf8))
            case "/readyz":
                let ready = dispatcher.isReady
                return AdminResponse(status: ready ? .ok : .serviceUnavailable, contentType: "text/plain", body: Array((ready ? "ready\n" : "restoring\n").utf8))
            case "/metrics":
                return AdminResponse(status: .ok, contentType: "text/plain; version=0.0.4", body: exposition?() ?? [])
            case "/status":
                let status = dispatcher.status
                let body = "{\"phase\":\"\(dispatcher.phase.rawValue)\",\"partitions\":\(status.partitions),\"in_progress\":\(status.outstanding),\"paused\":\(status.paused),\"ready\":\(dispatcher.isReady)}\n"
                return AdminResponse(status: .ok, contentType: "application/json", body: Array(body.utf8))
            default:
                return AdminResponse(status: .notFound, contentType: "text/plain", body: Array("not found: try /healthz, /readyz, /metrics, /status\n".utf8))
            }
        }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(AdminHandler(respond: respond))
                }
            }
            .bind(host: host, port: port).get()
        logger.notice("Admin endpoint listening", metadata: ["admin.address": "\(channel.localAddress.map { "\($0)" } ?? "\(host):\(port)")"])
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

struct AdminResponse: Sendable {
    var status: HTTPResponseStatus
    var contentType: String
    var body: [UInt8]
}

final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let respond: @Sendable (String) -> AdminResponse
    private var path = "/"
    private var keepAlive = false

    init(respond: @escaping @Sendable (String) -> AdminResponse) {
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "/")
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            let response = respond(path)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: response.contentType)
            headers.add(name: "content-length", value: String(response.body.count))
            if !keepAlive { headers.add(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
            let keepAlive = self.keepAlive
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { channel.close(promise: nil) }
            }
        }
    }
}
