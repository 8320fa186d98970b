import NIOCore
import NIOHTTPTypes

/// Runs one connection's ``RequestDeadlines`` on its event loop: one timer,
/// moved as requests and responses pass, closing the connection when a
/// client is too slow with a request's head or body.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: Duration
    private let requestTimeout: Duration
    private var machine: RequestDeadlines?
    private var timer: Scheduled<Void>?

    init(headerTimeout: Duration, requestTimeout: Duration) {
        self.headerTimeout = headerTimeout
        self.requestTimeout = requestTimeout
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
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: perform(machine?.headReceived(at: .now) ?? .none, context: context)
        case .body: break
        case .end: perform(machine?.requestEnded() ?? .none, context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { perform(machine?.responseEnded(at: .now) ?? .none, context: context) }
        context.write(data, promise: promise)
    }

    private func start(context: ChannelHandlerContext) {
        guard machine == nil else { return }
        let deadlines = RequestDeadlines(headerTimeout: headerTimeout, requestTimeout: requestTimeout, openedAt: .now)
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
