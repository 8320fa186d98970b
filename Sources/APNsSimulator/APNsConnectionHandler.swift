import LiveDispatchCore
import Logging
import NIOCore

/// Serves one TLS connection as APNs would: drives the connection's
/// nghttp2 session with the bytes read, judges each request with the APNs
/// rules, lets the connection state machine decide faults and limits, and
/// performs its actions. Lives on the channel's event loop only.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let rules: APNsRequestRules
    private let state: SimulatorState
    private let clock: @Sendable () -> Double
    private let logger: Logger
    private var machine: ConnectionStateMachine
    private var session: NGHTTP2ServerSession?
    private var requests: [Int32: ReceivedRequest] = [:]
    /// Accepted requests whose 200 is delayed, kept to record them when answered.
    private var acceptedRequests: [Int32: (request: ReceivedRequest, recipient: PushRecipient)] = [:]
    private var tokenState = ConnectionTokenState()
    private var random = SplitMix64()
    /// The faults in force, read once per batch of bytes rather than per frame.
    private var faults = SimulatorFaults()
    private var connectionID = 0
    private var closing = false
    private var closeAfterFlush = false

    init(
        rules: APNsRequestRules, maxConcurrentStreams: UInt32, initialMaxConcurrentStreams: UInt32,
        state: SimulatorState,
        clock: @escaping @Sendable () -> Double, logger: Logger
    ) {
        self.rules = rules
        self.state = state
        self.clock = clock
        self.logger = logger
        self.machine = ConnectionStateMachine(
            configuredMaxStreams: maxConcurrentStreams, initialMaxStreams: initialMaxConcurrentStreams)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = state.register(channel: context.channel, announcedMaxStreams: Int(machine.announcedMaxStreams))
        do {
            session = try NGHTTP2ServerSession(maxConcurrentStreams: machine.announcedMaxStreams)
        } catch {
            logger.error("cannot create an HTTP/2 session", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        flush(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        publish(isOpen: false)
        state.closed(connection: connectionID)
        session = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["connection.id": "\(connectionID)", "error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing, let session else { return }
        let buffer = unwrapInboundIn(data)
        do {
            try buffer.withUnsafeReadableBytes { bytes throws(SimulatorError) in try session.receive(bytes) }
        } catch {
            logger.debug("HTTP/2 protocol error", metadata: ["connection.id": "\(connectionID)", "error": "\(error)"])
            flush(context: context)
            context.close(promise: nil)
            return
        }
        handleEvents(context: context)
        publish(isOpen: !closing)
    }

    private func handleEvents(context: ChannelHandlerContext) {
        guard let session else { return }
        faults = state.faults
        for event in session.takeEvents() {
            guard !closing else { return }
            handle(event, context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush(context: context)
        context.fireChannelReadComplete()
    }

    private func handle(_ event: HTTP2ServerEvent, context: ChannelHandlerContext) {
        switch event {
        case .streamOpened(let stream):
            requests[stream] = ReceivedRequest(streamID: stream)
            perform(machine.streamOpened(stream, faults: faults), context: context)
        case .headers(let stream, let block):
            requests[stream]?.headers = block
        case .data(let stream, let bytes):
            requests[stream]?.appendBody(bytes)
        case .requestComplete(let stream):
            guard let request = requests.removeValue(forKey: stream) else { return }
            let now = Int64(clock().rounded(.down))
            let verdict =
                APNsRequestRules.isChannelRequest(request)
                ? state.withChannels { channels in
                    rules.evaluateChannelRequest(
                        request, tokenState: &tokenState, channels: &channels, now: now,
                        generatedID: { random.uuid() },
                        newChannelID: { ChannelRegistry.newChannelID(using: &random) })
                }
                : rules.evaluate(request, tokenState: &tokenState, now: now, generatedID: { random.uuid() })
            let recipient: PushRecipient? = verdict.deviceToken.map { .device($0) } ?? verdict.channelID.map { .channel($0) }
            let sequence = state.nextSequence()
            let actions = machine.requestReceived(
                stream, verdict: verdict, faults: faults, sequence: sequence, draw: faults.draw(sequence: sequence) ?? random.unit())
            for action in actions {
                if case .respond(let answered, let response, _, _) = action, answered == stream,
                    response.status == 200, verdict.isAccepted, let recipient
                {
                    acceptedRequests[stream] = (request, recipient)
                }
            }
            perform(actions, context: context)
        case .streamClosed(let stream, _):
            requests[stream] = nil
            acceptedRequests[stream] = nil
            perform(machine.streamClosed(stream), context: context)
        case .settingsAcknowledged:
            machine.settingsAcknowledged()
        }
    }

    private func perform(_ actions: [ConnectionStateMachine.Action], context: ChannelHandlerContext) {
        guard let session else { return }
        for action in actions {
            switch action {
            case .respond(let stream, let response, let apnsID, let delay):
                if delay > 0 {
                    context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) {
                        guard !self.closing, self.machine.shouldRespond(stream) else { return }
                        self.respond(stream: stream, response: response, apnsID: apnsID)
                        self.flush(context: context)
                    }
                } else {
                    respond(stream: stream, response: response, apnsID: apnsID)
                }
            case .refuse(let stream):
                acceptedRequests[stream] = nil
                session.submitReset(stream: stream, code: .refusedStream)
            case .sendSettings(let limit):
                do {
                    try session.submitSettings(maxConcurrentStreams: limit)
                } catch {
                    logger.error("cannot send SETTINGS", metadata: ["error": "\(error)"])
                }
            case .goAway(let lastStreamID):
                do {
                    try session.submitGoAway(
                        lastStreamID: lastStreamID, code: .noError, debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
                } catch {
                    logger.error("cannot send GOAWAY", metadata: ["error": "\(error)"])
                }
            case .closeWhenFlushed:
                closeAfterFlush = true
            case .reset:
                closing = true
                publish(isOpen: false)
                context.close(promise: nil)
                return
            }
        }
    }

    private func respond(stream: Int32, response: SimulatedResponse, apnsID: String) {
        guard let session else { return }
        machine.responseSubmitted(stream)
        var headers: [(String, String)] = [("apns-id", apnsID)]
        headers += response.headers.map { ($0.name, $0.value) }
        if response.status == 200, let (request, recipient) = acceptedRequests.removeValue(forKey: stream) {
            state.recorder.record(
                recipient, apnsID: apnsID, headers: request.headers, payload: request.body,
                connectionID: connectionID, receivedAt: clock())
        }
        let body = response.body
        if !body.isEmpty { headers.append(("content-type", "application/json")) }
        if let retryAfter = response.retryAfter { headers.append(("retry-after", String(retryAfter))) }
        session.submitResponse(stream: stream, status: response.status, headers: headers, body: body)
    }

    /// Writes whatever nghttp2 has queued, handles the streams that closed
    /// by sending, then closes if a GOAWAY has drained.
    private func flush(context: ChannelHandlerContext) {
        guard let session, !closing else { return }
        var output = context.channel.allocator.buffer(capacity: 0)
        do {
            // Handling closed streams may queue more frames (none today, but
            // a state machine action may), so drain until quiet.
            var wrote = 0
            repeat {
                let before = output.readableBytes
                try session.drainOutput { chunk in output.writeBytes(chunk) }
                handleEvents(context: context)
                wrote = output.readableBytes - before
            } while wrote > 0 && session.hasPendingOutput && !closing
        } catch {
            logger.debug("HTTP/2 send error", metadata: ["connection.id": "\(connectionID)", "error": "\(error)"])
            closing = true
            context.close(promise: nil)
            return
        }
        guard !closing else { return }
        let mustClose = closeAfterFlush || !session.isActive
        if mustClose { closing = true }
        if output.readableBytes > 0 {
            let written = context.writeAndFlush(wrapOutboundOut(output))
            if mustClose {
                // Close once the last frames (a GOAWAY, final responses) are out.
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            }
        } else if mustClose {
            context.close(promise: nil)
        }
    }

    private func publish(isOpen: Bool) {
        state.update(
            ConnectionSnapshot(
                id: connectionID, peakConcurrentStreams: machine.peakConcurrentStreams,
                streamsOpened: machine.streamsOpened, requestsReceived: machine.requestsReceived,
                announcedMaxConcurrentStreams: Int(machine.announcedMaxStreams),
                limitViolations: machine.limitViolations + (session?.automaticGoAways ?? 0), isOpen: isOpen))
    }
}
