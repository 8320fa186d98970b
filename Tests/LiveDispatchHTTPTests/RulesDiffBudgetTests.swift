import Foundation
import HTTPTypes
import HummingbirdTesting
import Kafka
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchWorker
import NIOCore
import Synchronization
import Testing

/// `POST /v1/rules/diff` costs at most its caller's budget: a run stops at
/// its events or seconds and answers with what it has, marked cut, and
/// each key runs one diff at a time.
@Suite("Rules diff budget")
struct RulesDiffBudgetTests {
    static let headers = InProcessServer.bearer("read-key") + [.contentType: "application/json"]

    /// The limits the source was asked to read.
    final class Asked: Sendable {
        private let limits = Mutex<[Int]>([])
        func add(_ limit: Int) { limits.withLock { $0.append(limit) } }
        var all: [Int] { limits.withLock { $0 } }
    }

    /// The request: the shipped sports rules given back unchanged, at the route's maximum.
    static func request() throws -> ByteBuffer {
        let text = try String(contentsOf: InProcessServer.repository.appendingPathComponent("Config/rules/sports.yaml"), encoding: .utf8)
        let body: JSONValue = ["files": ["sports.yaml": .string(text)], "minutes": 1440, "limit_events": 1_000_000]
        return ByteBuffer(bytes: body.serialized())
    }

    /// A score event of one of `matches` matches.
    static func record(_ number: Int) -> KafkaRecord {
        let value = #"{"match_id":"m\#(number % 50)","home":\#(number),"away":0}"#
        return KafkaRecord(
            topic: "sports.scores", partition: 0, offset: Int64(number), key: Array("m\(number % 50)".utf8), value: Array(value.utf8),
            timestampMilliseconds: 1_770_000_000_000 + Int64(number))
    }

    /// A source that hands `available` records (at most the limit asked for), in batches of 100.
    static func source(
        available: Int, budget: WorkerConfiguration.RulesDiffBudget, asked: Asked,
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }, gate: (@Sendable () async -> Void)? = nil
    ) -> WorkerAPI.RulesDiffSource {
        WorkerAPI.RulesDiffSource(
            rulesDirectory: InProcessServer.repository.appendingPathComponent("Config/rules").path, maxEventBytes: 1 << 20,
            read: { _, _, limit, body in
                asked.add(limit)
                if let gate { await gate() }
                var number = 0
                while number < min(available, limit) {
                    let end = min(number + 100, min(available, limit))
                    try body((number..<end).map(record))
                    number = end
                }
            },
            readBudget: budget, adminBudget: .init(events: 1_000_000, seconds: 60), clock: clock)
    }

    @Test("a request at the route's maximum stops at its key's events and says so")
    func eventsBudget() async throws {
        let asked = Asked()
        let server = try InProcessServer(rulesDiff: Self.source(available: 10_000, budget: .init(events: 300, seconds: 60), asked: asked))
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/v1/rules/diff", method: .post, headers: Self.headers, body: try Self.request()) { response in
                #expect(response.status == .ok)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["cut"] == "events", "\(answer)")
                #expect(answer["summary"]?["events_read"] == 300)
                #expect(answer["budget"]?["events"] == 300)
            }
        }
        #expect(asked.all == [300])
    }

    @Test("a run that reaches its seconds stops reading and answers with what it has")
    func secondsBudget() async throws {
        let start = ContinuousClock.now
        let ticks = Atomic<Int64>(0)
        // Every look at the clock is a millisecond later: 50 ms of budget is about 50 events.
        let clock: @Sendable () -> ContinuousClock.Instant = { start + .milliseconds(ticks.add(1, ordering: .relaxed).newValue) }
        let asked = Asked()
        let server = try InProcessServer(rulesDiff: Self.source(available: 10_000, budget: .init(events: 200_000, seconds: 0.05), asked: asked, clock: clock))
        try await server.application.test(.router) { client in
            try await client.execute(uri: "/v1/rules/diff", method: .post, headers: Self.headers, body: try Self.request()) { response in
                #expect(response.status == .ok)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["cut"] == "seconds", "\(answer)")
                let read = answer["summary"]?["events_read"]?.integerValue ?? -1
                #expect((1..<100).contains(read), "\(read) events read")
            }
        }
    }

    @Test("a run that fits its budget is not marked cut; a key with the admin scope gets the admin budget")
    func fits() async throws {
        let asked = Asked()
        let server = try InProcessServer(rulesDiff: Self.source(available: 500, budget: .init(events: 300, seconds: 60), asked: asked))
        try await server.application.test(.router) { client in
            let admin = InProcessServer.bearer("read-admin-key") + [.contentType: "application/json"]
            try await client.execute(uri: "/v1/rules/diff", method: .post, headers: admin, body: try Self.request()) { response in
                #expect(response.status == .ok)
                let answer = try JSONValue.parse(String(buffer: response.body))
                #expect(answer["cut"] == nil, "\(answer)")
                #expect(answer["summary"]?["events_read"] == 500)
                #expect(answer["budget"]?["events"] == 1_000_000)
            }
        }
    }

    @Test("while a key's diff runs, a second from the same key gets 429; another key's runs")
    func oneAtATimePerKey() async throws {
        let asked = Asked()
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let first = Atomic<Bool>(true)
        let gate: @Sendable () async -> Void = {
            // Only the first run waits, until the test has tried the second.
            guard first.exchange(false, ordering: .relaxed) else { return }
            enteredContinuation.yield()
            for await _ in release { break }
        }
        let server = try InProcessServer(rulesDiff: Self.source(available: 10, budget: .init(events: 300, seconds: 60), asked: asked, gate: gate))
        try await server.application.test(.router) { client in
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    try await client.execute(uri: "/v1/rules/diff", method: .post, headers: Self.headers, body: try Self.request()) { response in
                        #expect(response.status == .ok)
                    }
                }
                for await _ in entered { break }
                try await client.execute(uri: "/v1/rules/diff", method: .post, headers: Self.headers, body: try Self.request()) { response in
                    #expect(response.status == .tooManyRequests)
                    #expect(String(buffer: response.body).contains("a rules diff of this key is running"))
                }
                let admin = InProcessServer.bearer("read-admin-key") + [.contentType: "application/json"]
                try await client.execute(uri: "/v1/rules/diff", method: .post, headers: admin, body: try Self.request()) { response in
                    #expect(response.status == .ok)
                }
                releaseContinuation.yield()
                try await tasks.waitForAll()
            }
        }
        #expect(asked.all.count == 2)
    }
}
