import NIOCore
import NIOHTTPTypes

/// Runs one connection's ``RequestDeadlines`` on its event loop: one timer,
/// moved as requests and responses pass, closing the connection when a
/// client is too slow with a request's head or body, or once a response
/// that said `Connection: close` is written. On the main listener it also
/// reports to the ``ConnectionLedger``, which may refuse the connection
/// (its address holds its share), close it to make room, and shorten its
/// timeouts under pressure.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: Duration
    private let requestTimeout: Duration
    private var machine: RequestDeadlines?
    private var timer: Scheduled<Void>?
    /// Whether the response being written lets the connection live on (no `Connection: close`).
    private var keepAlive = true

    /// The main listener's ledger (``ConnectionLedger``), nil on the probe listener.
    private let ledger: ConnectionLedger?
    /// This connection's id in the ledger, once admitted.
    private var admitted: ConnectionAdmission.ConnectionID?

    init(headerTimeout: Duration, requestTimeout: Duration, ledger: ConnectionLedger? = nil) {
        self.headerTimeout = headerTimeout
        self.requestTimeout = requestTimeout
        self.ledger = ledger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if machine != nil { perform(machine?.connectionClosed() ?? .none, context: context) }
        leaveLedger()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        leaveLedger()
    }

    private func leaveLedger() {
        if let admitted, let ledger { ledger.closed(admitted) }
        admitted = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            if let admitted, let ledger {
                let timeouts = ledger.requestStarted(admitted)
                machine?.use(headerTimeout: timeouts.header, requestTimeout: timeouts.request)
            }
            perform(machine?.headReceived(at: .now) ?? .none, context: context)
        case .body: break
        case .end: perform(machine?.requestEnded() ?? .none, context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            if head.status.kind != .informational { keepAlive = head.headerFields[.connection]?.lowercased() != "close" }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            if keepAlive, let admitted, let ledger {
                let timeouts = ledger.responded(admitted, at: .now)
                machine?.use(headerTimeout: timeouts.header, requestTimeout: timeouts.request)
            }
            let action = machine?.responseEnded(at: .now, keepAlive: keepAlive) ?? .none
            keepAlive = true
            context.write(data, promise: promise)
            if action == .close { context.flush() }
            perform(action, context: context)
        }
    }

    private func start(context: ChannelHandlerContext) {
        guard machine == nil else { return }
        var header = headerTimeout, request = requestTimeout
        if let ledger {
            // Its address holds its share of the listener: closed before it is read.
            guard let (id, timeouts) = ledger.opened(context.channel, at: .now) else {
                context.close(promise: nil)
                return
            }
            admitted = id
            (header, request) = (timeouts.header, timeouts.request)
        }
        let deadlines = RequestDeadlines(headerTimeout: header, requestTimeout: request, openedAt: .now)
        machine = deadlines
        perform(deadlines.initialAction, context: context)
    }

    private func perform(_ action: RequestDeadlines.Action, context: ChannelHandlerContext) {
        switch action {
        case .arm(let deadline):
            timer?.cancel()
            // Deadlines are at most 24 h away (the configuration's bound).
            let delay = max(.zero, deadline - ContinuousClock.now)
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) { [self] in
                timer = nil
                perform(machine?.timerFired(at: .now) ?? .none, context: context)
            }
        case .cancelTimer:
            timer?.cancel()
            timer = nil
        case .close:
            timer?.cancel()
            timer = nil
            context.close(promise: nil)
        case .none:
            break
        }
    }
}
