import Foundation
import HTTPTypes
import Hummingbird
import LiveDispatchRules
import LiveDispatchWorker
import Logging
import NIOCore
import NIOEmbedded
import Synchronization

/// The worker's real router for the `http` fuzz target, with its seams
/// replaced by recorders: a request is routed through every middleware and
/// handler, and the harness says whether a handler behind a key ran
/// (something was produced to or read from Kafka).
@_spi(Fuzzing) public final class HTTPFuzzHarness: Sendable {
    /// The keys the harness's server knows, by secret.
    public static let secrets: [String: WorkerConfiguration.APIScope] = ["ingest-secret": .ingest, "read-secret": .read, "admin-secret": .admin]

    private let responder: RouterResponder<BasicRequestContext>
    /// Set by the recorders when a handler behind a key produced or read.
    private final class Flag: Sendable {
        let raised = Mutex(false)
    }

    private let flag = Flag()

    public init() throws {
        var configuration = WorkerConfiguration().http
        configuration.apiKeys = Self.secrets.map { secret, scope in
            .init(name: scope.rawValue, sha256: APIKeyTable.sha256Hex(Array(secret.utf8)), scopes: [scope])
        }
        let flag = flag
        let rules = try RuleSet.compile(files: [])
        let api = WorkerAPI(
            topics: .init(commands: "c", tokens: "t", state: "s", tokenStore: "ts", deadLetters: "d", channels: "ch"),
            produce: { _, _, _ in flag.raised.withLock { $0 = true } }, makeID: { "id" }, rules: { rules },
            readTopic: { _, _, _ in flag.raised.withLock { $0 = true } })
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        let (router, _) = try WorkerHTTPServer.router(
            api: api, configuration: configuration, openReads: false,
            health: .init(isReady: { true }, status: { "{}" }), exposition: { [] }, logger: logger)
        responder = router.buildResponder()
    }

    /// Routes one request and waits for its answer: its status, and whether
    /// a handler behind a key ran.
    public func route(_ head: HTTPRequest, body: [UInt8]) -> (status: Int, handlerRan: Bool) {
        flag.raised.withLock { $0 = false }
        let status = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        let responder = responder
        Task {
            let request = Request(head: head, body: .init(buffer: ByteBuffer(bytes: body)))
            let channel = EmbeddedChannel()
            // Closed once answered: an open embedded channel keeps its pipeline alive.
            defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
            let context = BasicRequestContext(source: .init(channel: channel, logger: Logger(label: "fuzz")))
            let code: Int
            do {
                code = Int(try await responder.respond(to: request, context: context).status.code)
            } catch let error as any HTTPResponseError {
                code = Int(error.status.code)
            } catch {
                code = 500
            }
            status.withLock { $0 = code }
            done.signal()
        }
        done.wait()
        return (status.withLock { $0 }, flag.raised.withLock { $0 })
    }

    /// Whether `path` is in the one spelling the server routes.
    public static func isCanonical(_ path: String) -> Bool { RequestPath.problem(path) == nil }
}
