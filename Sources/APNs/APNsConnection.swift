import LiveDispatchCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// What a connection tells its pool. Delivered on the connection's event loop.
enum APNsConnectionEvent: Sendable {
    /// The server's stream limit (from SETTINGS).
    case settings(maxConcurrentStreams: Int)
    /// Complete responses, in the order they ended (all those read at once).
    case responses([(requestID: Int, response: APNsResponse)])
    /// Streams that ended without a response, and how.
    case streamsEnded([(requestID: Int, end: APNsConnectionPool.StateMachine.StreamEnd)])
    /// The server sent GOAWAY; the streams above its last-stream-id follow
    /// as ``streamsEnded(_:)``.
    case goaway(errorCode: UInt32, debug: String)
    /// The channel closed after it was ready, with how each of its open
    /// streams ended.
    case closed([(requestID: Int, end: APNsConnectionPool.StateMachine.StreamEnd)])
}

/// One HTTP/2 connection to APNs: a NIO channel with TLS and an
/// ``HTTP2ClientHandler`` driving an nghttp2 session. Its methods may be
/// called from any thread; they hop to the channel's event loop.
final class APNsConnection: Sendable {
    let id: Int
    let channel: any Channel
    private let handler: NIOLoopBound<HTTP2ClientHandler>

    /// `:authority` of every request: the server name.
    let authority: String

    private init(id: Int, channel: any Channel, handler: NIOLoopBound<HTTP2ClientHandler>, authority: String) {
        self.id = id
        self.channel = channel
        self.handler = handler
        self.authority = authority
    }

    /// Connects, completes TLS with ALPN `h2`, and returns the connection.
    static func connect(
        id: Int, endpoint: APNsClientConfiguration.Endpoint, sslContext: NIOSSLContext, connectTimeout: Double,
        pingTimeout: Double, eventLoop: any EventLoop, logger: Logger,
        onEvent: @escaping @Sendable (APNsConnectionEvent) -> Void
    ) -> EventLoopFuture<APNsConnection> {
        let ready = eventLoop.makePromise(of: NIOLoopBound<HTTP2ClientHandler>.self)
        let serverName = endpoint.serverName
        let sniName: String? = isIPAddress(serverName) ? nil : serverName
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.milliseconds(Int64(connectTimeout * 1000)))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: sniName)
                    let http2 = try HTTP2ClientHandler(
                        pingTimeout: pingTimeout, ready: ready, logger: logger, authority: serverName, onEvent: onEvent)
                    try channel.pipeline.syncOperations.addHandlers([tls, http2])
                }
            }
        return bootstrap.connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel in
                ready.futureResult
                    .map { APNsConnection(id: id, channel: channel, handler: $0, authority: serverName) }
                    .flatMapErrorThrowing { error in
                        channel.close(promise: nil)
                        throw error
                    }
            }
            .flatMapErrorThrowing { error in
                ready.fail(error)
                throw error
            }
    }

    private static func isIPAddress(_ name: String) -> Bool {
        (try? SocketAddress(ipAddress: name, port: 0)) != nil
    }

    /// A request to start: the pool's id, the push and its provider token.
    struct Execution: Sendable {
        var requestID: Int
        var request: APNsRequest
        var token: String
    }

    /// Starts requests; their results arrive as events. Requests started
    /// while the event loop is busy are submitted together, then flushed
    /// once. A request travels as it is (its payload is not copied); the
    /// event loop writes its headers into the connection's templates.
    ///
    /// Called on the channel's own event loop (the pool dispatching queued
    /// requests as responses are read), they are submitted at once and
    /// written with whatever else that read produced.
    func execute(_ executions: [Execution]) {
        if channel.eventLoop.inEventLoop {
            let handler = self.handler.value
            for execution in executions { handler.submit(execution) }
            return
        }
        let mustSchedule = outbox.withLock { outbox in
            outbox.submissions.append(contentsOf: executions)
            guard !outbox.scheduled else { return false }
            outbox.scheduled = true
            return true
        }
        guard mustSchedule else { return }
        channel.eventLoop.execute { [self] in
            let submissions = outbox.withLock { outbox in
                let submissions = outbox.submissions
                outbox.submissions.removeAll(keepingCapacity: true)
                outbox.scheduled = false
                return submissions
            }
            let handler = self.handler.value
            for submission in submissions { handler.submit(submission, flush: false) }
            handler.flushNow()
        }
    }

    /// Resets a request's stream; no event follows for it.
    func cancel(requestID: Int) {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.cancel(requestID: requestID) }
    }

    func ping() {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.ping() }
    }

    /// Sends GOAWAY and closes the channel.
    func close() {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.goawayAndClose() }
    }

    private let outbox = Mutex<(submissions: [Execution], scheduled: Bool)>(([], false))
}

/// Drives one nghttp2 client session from a NIO channel: bytes read go into
/// the session, frames it produces are written out, its events become
/// ``APNsConnectionEvent``s. Lives on its channel's event loop only.
final class HTTP2ClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private struct Stream {
        var requestID: Int
        var status: Int?
        var apnsID: String?
        var headers: [String: String] = [:]
        var body: [UInt8] = []
    }

    /// Longest response body kept; APNs bodies are a few dozen bytes.
    private static let maxBodyBytes = 16 * 1024

    private let session: NGHTTP2ClientSession
    private let pingTimeout: Double
    private let ready: EventLoopPromise<NIOLoopBound<HTTP2ClientHandler>>
    private let logger: Logger
    private let onEvent: @Sendable (APNsConnectionEvent) -> Void
    private var context: ChannelHandlerContext?
    private var streams: [Int32: Stream] = [:]
    private var streamByRequest: [Int: Int32] = [:]
    private var goawayLastStreamID: Int32?
    private var isReady = false
    private var isClosed = false
    private var flushPending = false
    /// True while read events are handled: `channelRead` writes what they
    /// produce when they are done, so no flush is scheduled meanwhile.
    private var reading = false
    private var pingTimer: Scheduled<Void>?
    /// `:authority` of every request: the server name.
    private let authority: String
    /// Push headers laid out once per app and provider token.
    private var templates = HTTP2PushHeaderTemplates()

    init(
        pingTimeout: Double, ready: EventLoopPromise<NIOLoopBound<HTTP2ClientHandler>>, logger: Logger,
        authority: String, onEvent: @escaping @Sendable (APNsConnectionEvent) -> Void
    ) throws {
        self.session = try NGHTTP2ClientSession()
        self.authority = authority
        self.pingTimeout = pingTimeout
        self.ready = ready
        self.logger = logger
        self.onEvent = onEvent
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish()
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = tlsEvent {
            guard negotiated == "h2" else {
                ready.fail(APNsError.connectionFailed("the server did not agree to HTTP/2 (ALPN \(negotiated ?? "none"))"))
                context.close(promise: nil)
                return
            }
            isReady = true
            flush()
            ready.succeed(NIOLoopBound(self, eventLoop: context.eventLoop))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let result = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(HTTP2SessionError) -> [HTTP2SessionEvent] in try session.receive(bytes) }
        }
        switch result {
        case .success(let events):
            reading = true
            handle(events)
            reading = false
            flush()
            if !session.isActive { context.close(promise: nil) }
        case .failure(let error):
            logger.warning("HTTP/2 session failed", metadata: ["apns.error": "\(error)"])
            flush()
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs connection error", metadata: ["apns.error": "\(error)"])
        ready.fail(error)
        context.close(promise: nil)
    }

    // MARK: Commands from the pool

    func submit(_ execution: APNsConnection.Execution, flush: Bool = true) {
        let requestID = execution.requestID
        guard !isClosed, goawayLastStreamID == nil, session.isOpen else {
            notSent(requestID)
            return
        }
        do {
            let request = execution.request
            let submitted = templates.withHeaders(of: request, token: execution.token, authority: authority) { template in
                Result { () throws(HTTP2SessionError) in
                    try session.submitRequest(storage: template.storage, fields: template.fields, body: request.payload)
                }
            }
            let streamID: Int32
            if let submitted {
                streamID = try submitted.get()
            } else {
                let block = HTTP2HeaderBlock(request, token: execution.token, authority: authority)
                streamID = try session.submitRequest(storage: block.storage, fields: block.fields, body: request.payload)
            }
            streams[streamID] = Stream(requestID: requestID)
            streamByRequest[requestID] = streamID
            if flush && !reading { scheduleFlush() }
        } catch {
            logger.warning("could not start an HTTP/2 stream", metadata: ["apns.error": "\(error)"])
            notSent(requestID)
        }
    }

    /// Reports a request that could not start, from a later turn of the
    /// loop: the pool may hand it straight back to this connection, and a
    /// report made inside `submit` would then recurse.
    private func notSent(_ requestID: Int) {
        let onEvent = self.onEvent
        guard let context else {
            onEvent(.streamsEnded([(requestID, .notSent)]))
            return
        }
        context.eventLoop.execute { onEvent(.streamsEnded([(requestID, .notSent)])) }
    }

    func cancel(requestID: Int) {
        guard let streamID = streamByRequest.removeValue(forKey: requestID) else { return }
        streams[streamID] = nil
        session.resetStream(streamID, errorCode: NGHTTP2ClientSession.cancel)
        scheduleFlush()
    }

    func ping() {
        guard !isClosed, pingTimer == nil, let context else { return }
        do {
            try session.submitPing()
        } catch {
            return
        }
        let timeout = TimeAmount.milliseconds(Int64(pingTimeout * 1000))
        pingTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            guard let self, let context = self.context else { return }
            self.logger.warning("PING unanswered, closing the connection")
            context.close(promise: nil)
        }
        scheduleFlush()
    }

    func goawayAndClose() {
        guard !isClosed, let context else { return }
        session.submitGoaway()
        flush()
        context.close(promise: nil)
    }

    // MARK: Internals

    private func handle(_ events: [HTTP2SessionEvent]) {
        // Responses read together reach the pool together (one lock for all).
        var responses: [(requestID: Int, response: APNsResponse)] = []
        func emit(_ event: APNsConnectionEvent) {
            if !responses.isEmpty {
                onEvent(.responses(responses))
                responses.removeAll()
            }
            onEvent(event)
        }
        for event in events {
            switch event {
            // Streams are changed in place: a copy taken out of the dictionary
            // would copy its header dictionary and body on the first write.
            case .status(let streamID, let status):
                streams[streamID]?.status = status
            case .apnsID(let streamID, let value):
                streams[streamID]?.apnsID = value
            case .header(let streamID, let name, let value):
                streams[streamID]?.headers[name] = value
            case .data(let streamID, let bytes):
                guard let count = streams[streamID]?.body.count, count + bytes.count <= Self.maxBodyBytes else { continue }
                streams[streamID]?.body.append(contentsOf: bytes)
            case .streamClosed(let streamID, let errorCode):
                guard let stream = streams.removeValue(forKey: streamID) else { continue }
                streamByRequest[stream.requestID] = nil
                if errorCode == 0, let status = stream.status {
                    responses.append(
                        (stream.requestID, APNsResponse(status: status, apnsID: stream.apnsID, headers: stream.headers, body: stream.body)))
                } else if errorCode == NGHTTP2ClientSession.refusedStream {
                    emit(.streamsEnded([(stream.requestID, .refused)]))
                } else if goawayLastStreamID.map({ streamID > $0 }) ?? false {
                    emit(.streamsEnded([(stream.requestID, .aboveGoawayLastStream)]))
                } else if errorCode == 0 {
                    emit(.streamsEnded([(stream.requestID, .incomplete)]))
                } else {
                    emit(.streamsEnded([(stream.requestID, .reset(errorCode: errorCode))]))
                }
            case .settings(let maxConcurrentStreams):
                emit(.settings(maxConcurrentStreams: maxConcurrentStreams))
            case .goaway(let lastStreamID, let errorCode, let debugData):
                goawayLastStreamID = min(lastStreamID, goawayLastStreamID ?? lastStreamID)
                emit(.goaway(errorCode: errorCode, debug: String(decoding: debugData, as: UTF8.self)))
            case .pingAcknowledged:
                pingTimer?.cancel()
                pingTimer = nil
            }
        }
        if !responses.isEmpty { onEvent(.responses(responses)) }
    }

    private func scheduleFlush() {
        guard !flushPending, let context else { return }
        flushPending = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushPending = false
            flush()
        }
    }

    /// Writes every pending frame now.
    func flushNow() { flush() }

    private func flush() {
        guard isReady, !isClosed, let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: 0)
        let produced: [HTTP2SessionEvent]
        do {
            produced = try session.send { chunk in buffer.writeBytes(chunk) }
        } catch {
            logger.warning("HTTP/2 session failed", metadata: ["apns.error": "\(error)"])
            context.close(promise: nil)
            return
        }
        if buffer.readableBytes > 0 { context.writeAndFlush(wrapOutboundOut(buffer), promise: nil) }
        if !produced.isEmpty { handle(produced) }
    }

    /// Reports every open stream and the close, once.
    private func finish() {
        guard !isClosed else { return }
        isClosed = true
        pingTimer?.cancel()
        pingTimer = nil
        ready.fail(APNsError.connectionClosed("the connection closed during setup"))
        let open = streams.sorted { $0.key < $1.key }
        streams.removeAll()
        streamByRequest.removeAll()
        let ended = open.map { streamID, stream in
            let aboveGoaway = goawayLastStreamID.map { streamID > $0 } ?? false
            return (requestID: stream.requestID, end: aboveGoaway ? .aboveGoawayLastStream : APNsConnectionPool.StateMachine.StreamEnd.connectionLost)
        }
        session.close()
        // Before the handshake completed the pool learns of the failure from
        // the connect future instead; reporting both would reconnect twice.
        if isReady { onEvent(.closed(ended)) }
    }
}
