import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Kafka
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTracing
import Tracing
import LiveDispatchWorker
import Logging
import ServiceLifecycle
import Synchronization
import LiveDispatchTesting
import TestSupport

/// The worker's real router (``WorkerHTTPServer/router(api:configuration:openReads:health:exposition:logger:clock:)``)
/// in the test process, with the worker's seams replaced by recorders: what
/// was produced to Kafka, which topics were read. A handler that ran leaves
/// a trace in one of them.
final class InProcessServer: Sendable {
    /// The keys the server knows: (secret, name, scopes).
    static let secrets: [(secret: String, name: String, scopes: Set<WorkerConfiguration.APIScope>)] = [
        ("ingest-key", "backend", [.ingest]), ("read-key", "viewer", [.read]), ("admin-key", "operator", [.admin]),
        ("read-admin-key", "operator-reader", [.read, .admin]),
    ]
    static var keys: [WorkerConfiguration.APIKey] {
        secrets.map { .init(name: $0.name, sha256: APIKeyTable.sha256Hex(Array($0.secret.utf8)), scopes: $0.scopes) }
    }

    /// What the seams saw.
    final class Recorder: Sendable {
        let produced = Mutex<[(topic: String, key: [UInt8], value: [UInt8])]>([])
        /// The trace context each record was produced under (its headers).
        let producedTraces = Mutex<[TraceContext?]>([])
        let reads = Mutex<[String]>([])
        /// Records the read of a topic hands to its caller, by topic.
        let records: Mutex<[String: [KafkaRecord]]>

        init(records: [String: [KafkaRecord]]) { self.records = Mutex(records) }
    }

    let recorder: Recorder
    let routes: [RegisteredRoute]
    let router: RouterResponder<BasicRequestContext>
    /// For HummingbirdTesting (`.router`, `.live`).
    var application: Application<RouterResponder<BasicRequestContext>> {
        Application(responder: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "test"))
    }

    init(
        openReads: Bool = false, http: WorkerConfiguration.HTTP = WorkerConfiguration().http, records: [String: [KafkaRecord]] = [:],
        currentState: @escaping @Sendable (ActivityID) -> ActivityState? = { _ in nil }, tracer: LiveDispatchTracer? = nil,
        apps: AppDirectory = .unchecked, brazeApps: BrazeApps = BrazeApps(),
        hasNoState: @escaping @Sendable (ActivityID) async -> Bool = { _ in false }, rulesDiff: WorkerAPI.RulesDiffSource? = nil,
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) throws {
        let recorder = Recorder(records: records)
        self.recorder = recorder
        var configuration = http
        configuration.apiKeys = Self.keys
        let rules = try RuleSetStore(directory: Self.repository.appendingPathComponent("Config/rules").path).current
        let api = WorkerAPI(
            topics: .init(commands: "livedispatch.commands", tokens: "livedispatch.tokens", state: "livedispatch.state",
                          tokenStore: "livedispatch.token-store", deadLetters: "livedispatch.dead-letters",
                          channels: "livedispatch.channels"),
            produce: { topic, key, value in
                recorder.produced.withLock { $0.append((topic, key, value)) }
                recorder.producedTraces.withLock { $0.append(InstrumentationContext.current?.traceContext) }
            },
            makeID: { "id-1" }, rules: { rules },
            readTopic: { topic, _, body in
                recorder.reads.withLock { $0.append(topic) }
                for record in recorder.records.withLock({ $0[topic] ?? [] }) { body(record) }
            }, apps: apps, brazeApps: brazeApps, currentState: currentState, hasNoState: hasNoState, rulesDiff: rulesDiff)
        let (router, guarded) = try WorkerHTTPServer.router(
            api: api, configuration: configuration, openReads: openReads,
            health: .init(isReady: { true }, status: { "{}" }), exposition: { Array("livedispatch_up 1\n".utf8) },
            logger: Logger(label: "test"), clock: clock, tracer: tracer)
        routes = guarded.routes
        self.router = router.buildResponder()
    }

    /// Runs the server on a free loopback port for `body`, which talks to it
    /// over real sockets (raw requests: any Host, any framing).
    func withListening<T: Sendable>(_ body: @Sendable (Int) async throws -> T) async throws -> T {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            responder: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: Logger(label: "test"))
        let group = ServiceGroup(configuration: .init(services: [application], gracefulShutdownSignals: [], logger: Logger(label: "test")))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw TestSetupError("the server did not start") }
            do {
                let result = try await body(port)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
        }
    }

    /// Whether any handler behind a key ran: something was produced or read.
    var handlersRan: Bool { !recorder.produced.withLock(\.isEmpty) || !recorder.reads.withLock(\.isEmpty) }

    /// The records produced so far.
    var producedRecords: [(topic: String, key: [UInt8], value: [UInt8])] { recorder.produced.withLock { $0 } }

    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func secret(for scope: WorkerConfiguration.APIScope) -> String {
        secrets.first { $0.scopes.contains(scope) }?.secret ?? ""
    }

    static func bearer(_ secret: String) -> HTTPFields { [.authorization: "Bearer \(secret)"] }
}

/// A route's path template with its parameters filled in with plain values.
func concretePath(_ template: String) -> String {
    PathSpellings.concrete(template, activity: "match-1", deadLetter: "0-1")
}

/// One answer read off a raw connection.
struct RawAnswer {
    var status: Int
    var head: String
    var body: String
}

/// Sends `request` (a whole HTTP/1.1 request, as bytes on the wire) and reads the answer.
func rawRequest(port: Int, _ request: String, timeout: Duration = .seconds(10)) async throws -> RawAnswer {
    let connection = try RawConnection(port: port)
    connection.send(request)
    var received: [UInt8] = []
    return try await waitFor("an answer to \(request.prefix(60).debugDescription)", timeout: timeout) { () -> RawAnswer? in
        var closed = false
        loop: while true {
            switch connection.readNow() {
            case .data(let bytes): received += bytes
            case .closed: closed = true; break loop
            case .nothing: break loop
            }
        }
        let text = String(decoding: received, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<split.lowerBound]), body = String(text[split.upperBound...])
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
        guard closed || length.map({ body.utf8.count >= $0 }) ?? true else { return nil }
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return RawAnswer(status: status, head: head, body: body)
    }
}

/// Both sets of fields, in order.
func + (lhs: HTTPFields, rhs: HTTPFields) -> HTTPFields {
    var fields = lhs
    fields.append(contentsOf: rhs)
    return fields
}
