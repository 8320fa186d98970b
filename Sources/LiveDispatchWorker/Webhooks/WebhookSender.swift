import APNs
import CoreMetrics
import Foundation
import LiveDispatchCore
import LiveDispatchTracing
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// POSTs outcomes to the configured webhook, signed the Standard Webhooks
/// way, as a ``WebhookQueue`` decides: bounded, a few requests at a time,
/// retried with backoff, given up after `max_attempts` or `max_age`.
///
/// ``deliver(id:body:)`` only queues under a lock and hands the sends to
/// the event loop, so a slow or silent receiver never slows its caller. The
/// sender works from its creation; ``run()`` (a ServiceLifecycle service)
/// waits for the graceful shutdown and then calls ``shutdown()``.
public final class WebhookSender: Service, Sendable {
    private struct State {
        var machine: WebhookQueue
        var random = SplitMix64()
        /// The one timer, armed at the machine's next deadline.
        var timer = MachineTimer<Scheduled<Void>>()
        var isShutDown = false
        /// Callers of ``shutdown()`` waiting for the requests in flight to end.
        var drained: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>
    private let client: HTTP1Client
    private let signer: WebhookSigner
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let metrics: WebhookMetrics

    /// A sender to `endpoint`. For an `https` endpoint the server is checked
    /// against the system's trust roots and `trustRoots`.
    public init(
        endpoint: HTTP1Client.Endpoint, signer: WebhookSigner, timeout: Duration = .seconds(5),
        queue: WebhookQueue.Configuration = .init(), trustRoots: [NIOSSLCertificate] = [], logger: Logger,
        metrics: any MetricsFactory = MetricsSystem.factory, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        let tls = endpoint.isTLS ? try HTTP1Client.tlsContext(extraRoots: trustRoots) : nil
        client = HTTP1Client(endpoint: endpoint, timeout: timeout, tls: tls, group: group)
        self.signer = signer
        eventLoop = group.next()
        self.logger = logger
        self.metrics = WebhookMetrics(factory: metrics)
        state = Mutex(State(machine: WebhookQueue(configuration: queue)))
    }

    /// The sender of a `webhooks:` section; nil when it is off.
    public convenience init?(
        configuration: WorkerConfiguration.Webhooks, logger: Logger, metrics: any MetricsFactory = MetricsSystem.factory,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        guard configuration.isEnabled else { return nil }
        guard let endpoint = HTTP1Client.Endpoint(url: configuration.url) else {
            throw WorkerStartError("webhooks.url \(configuration.url.debugDescription) is not an http:// or https:// URL")
        }
        let signer: WebhookSigner
        do {
            signer = try WebhookSigner(secret: configuration.secret)
        } catch {
            throw WorkerStartError("webhooks.secret is not usable: \(error.description)")
        }
        let roots = configuration.caFile.isEmpty ? [] : try NIOSSLCertificate.fromPEMFile(configuration.caFile)
        try self.init(
            endpoint: endpoint, signer: signer, timeout: .milliseconds(Int64(exactly: (min(max(configuration.timeout, 0.01), 600) * 1000).rounded()) ?? 5_000),
            queue: configuration.queue, trustRoots: roots, logger: logger, metrics: metrics, group: group)
    }

    /// Where outcomes are posted.
    public var endpoint: HTTP1Client.Endpoint { client.endpoint }

    /// Outcomes held: waiting, in flight or backing off.
    public var queued: Int { state.withLock { $0.machine.count } }

    /// Queues one outcome for the webhook; never blocks, never throws. A
    /// full queue drops it (counted as `queue-full`).
    public func deliver(id: String, body: [UInt8]) {
        let (actions, count, replaced) = state.withLock { state in
            let actions = state.machine.enqueue(id: id, body: body, now: now)
            return (actions, state.machine.count, rearm(&state))
        }
        replaced?.cancel()
        metrics.recordQueued(count)
        guard !actions.isEmpty else { return }
        eventLoop.execute { self.perform(actions) }
    }

    /// Waits for the graceful shutdown (or cancellation), then ``shutdown()``.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// How long ``shutdown()`` waits for the requests in flight: a
    /// receiver that does not answer never holds up the worker's exit.
    public static let shutdownGrace = TimeAmount.seconds(2)

    /// Stops: what waits is dropped (counted as `shutdown`), outcomes
    /// delivered after are dropped too, and it returns once the requests in
    /// flight have ended, or after ``shutdownGrace`` (what is still in
    /// flight then is given up with the process).
    public func shutdown() async {
        let (actions, count, armed) = state.withLock { state in
            state.isShutDown = true
            return (state.machine.shutDown(), state.machine.count, state.timer.disarm())
        }
        armed?.cancel()
        metrics.recordQueued(count)
        perform(actions)
        let grace = eventLoop.scheduleTask(in: Self.shutdownGrace) { [weak self] in
            guard let self else { return }
            let waiting = state.withLock { state in
                var drained: [CheckedContinuation<Void, Never>] = []
                swap(&drained, &state.drained)
                return drained
            }
            if !waiting.isEmpty {
                logger.warning("Webhook requests still in flight at shutdown are given up", metadata: ["webhook.in_flight": "\(state.withLock { $0.machine.inFlight })"])
            }
            for continuation in waiting { continuation.resume() }
        }
        defer { grace.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isDrained = state.withLock { state in
                guard state.machine.inFlight > 0 else { return true }
                state.drained.append(continuation)
                return false
            }
            if isDrained { continuation.resume() }
        }
    }

    /// The machine's clock: the event loop's uptime, as its deadlines are
    /// delays (backoff, `max_age`) from no record.
    private var now: UnixTime { eventLoop.uptime }

    /// Arms the timer at the machine's next deadline (see ``MachineTimer``
    /// for when); returns the timer it replaced.
    private func rearm(_ state: inout State) -> Scheduled<Void>? {
        let next = state.isShutDown ? nil : state.machine.nextDeadline
        return state.timer.arm(at: next, now: now, on: eventLoop) { [weak self] number in self?.timerFired(number) }
    }

    private func timerFired(_ number: UInt64) {
        let (actions, count, replaced): ([WebhookQueue.Action], Int, Scheduled<Void>?) = state.withLock { state in
            guard state.timer.fired(number) else { return ([], state.machine.count, nil) }
            let actions = state.machine.timerFired(now: now)
            return (actions, state.machine.count, rearm(&state))
        }
        replaced?.cancel()
        metrics.recordQueued(count)
        perform(actions)
    }

    private func answered(_ ticket: WebhookQueue.Ticket, _ result: WebhookQueue.Result) {
        let (actions, count, replaced, drained) = state.withLock { state in
            let actions = state.machine.answered(ticket, result: result, now: now, draw: state.random.unit())
            var drained: [CheckedContinuation<Void, Never>] = []
            if state.isShutDown, state.machine.inFlight == 0 { swap(&drained, &state.drained) }
            return (actions, state.machine.count, rearm(&state), drained)
        }
        replaced?.cancel()
        metrics.recordQueued(count)
        perform(actions)
        for continuation in drained { continuation.resume() }
    }

    private func perform(_ actions: [WebhookQueue.Action]) {
        for action in actions {
            switch action {
            case .send(let ticket, let id, let body, let attempt):
                if attempt > 1 { metrics.recordRetry() }
                send(ticket, id: id, body: body)
            case .delivered(let id, let attempts):
                metrics.recordDelivered()
                logger.debug("Delivered an outcome to the webhook", metadata: ["webhook.id": "\(id)", "webhook.attempts": "\(attempts)"])
            case .dropped(let id, let reason):
                metrics.recordDropped(reason)
                logger.log(
                    level: reason == .queueFull || reason == .shutdown ? .debug : .warning, "Dropped an outcome the webhook did not take",
                    metadata: ["webhook.id": "\(id)", "webhook.reason": "\(reason.rawValue)"])
            }
        }
    }

    private func send(_ ticket: WebhookQueue.Ticket, id: String, body: [UInt8]) {
        let timestamp = Int64(exactly: Date().timeIntervalSince1970.rounded(.down)) ?? 0
        let headers = [("content-type", "application/json")] + signer.headers(id: id, timestamp: timestamp, body: body)
        client.send(body, headers: headers).whenComplete { [self] result in
            switch result {
            case .success(let response):
                answered(ticket, .answered(status: response.status, retryAfter: Self.retryAfter(response.headers)))
            case .failure(let error as HTTP1Client.RequestError) where error.isTimeout:
                logger.debug("The webhook did not answer in time", metadata: ["webhook.id": "\(id)"])
                answered(ticket, .timedOut)
            case .failure(let error):
                logger.debug("The webhook could not be reached", metadata: ["webhook.id": "\(id)", "error": "\(error)"])
                answered(ticket, .failed)
            }
        }
    }

    /// `Retry-After` in seconds, when the answer gives it as a number of
    /// seconds (an HTTP date is ignored: the backoff applies).
    static func retryAfter(_ headers: HTTPHeaders) -> Double? {
        guard let text = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces),
              !text.isEmpty, text.allSatisfy(\.isASCII), let seconds = UInt32(text)
        else { return nil }
        return Double(seconds)
    }
}
