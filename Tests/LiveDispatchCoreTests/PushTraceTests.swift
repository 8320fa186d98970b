@testable import LiveDispatchCore
import Testing

/// Trace contexts pass through the partition's machine as plain data: a
/// traced command's context reaches the push that merges it and the sends
/// of that push, and nothing the machine decides changes.
@Suite("Push traces")
struct PushTraceTests {
    let tokens = [
        (try? DeviceToken(hex: String(repeating: "aa01", count: 16))),
        (try? DeviceToken(hex: String(repeating: "bb02", count: 16))),
    ].compactMap { $0 }

    func harness() throws -> DispatcherHarness {
        var harness = DispatcherHarness()
        let match = try ActivityID("match-42")
        harness.restore(tokens: tokens.map { TokenRegistration(activityID: match, token: $0, environment: .production) })
        return harness
    }

    static func context(_ number: UInt64, sampled: Bool = true) throws -> TraceContext {
        try #require(TraceContext(traceIDHigh: 0xAB, traceIDLow: number, spanID: number &* 7, flags: sampled ? 1 : 0))
    }

    static func update(_ score: Int) -> String { #"{"activity_id": "match-42", "content_state": {"teamOneScore": \#(score)}}"# }

    @Test("the traced commands a push merged come back with it, the newest last, and its sends carry the push's span context")
    func mergedCommands() throws {
        var harness = try harness()
        let first = try Self.context(1)
        let second = try Self.context(2)
        let heldSince = harness.now
        harness.command(0, Self.update(1), trace: first)
        harness.advance(by: 0.1)
        harness.command(1, Self.update(2))
        harness.command(2, Self.update(3), trace: second)
        let secondHeldSince = harness.now
        harness.advance(by: 0.3)
        let traced = harness.observations.compactMap { if case .pushTraced(let trace) = $0 { trace } else { nil } }
        let trace = try #require(traced.first)
        #expect(traced.count == 1)
        #expect(trace.traces == [
            CommandTrace(context: first, offset: 0, heldSince: heldSince),
            CommandTrace(context: second, offset: 2, heldSince: secondHeldSince),
        ])
        #expect(trace.commands == 3 && trace.tokens == 2 && trace.version == 1 && trace.event == .update)
        #expect(trace.flushedAt > secondHeldSince && trace.flushedAt <= harness.now)
        let context = try #require(trace.context)
        #expect(context.traceIDLow == second.traceIDLow && context.traceIDHigh == second.traceIDHigh)
        #expect(context.isSampled && context.spanID != second.spanID)
        #expect(harness.sent.count == 2)
        #expect(harness.sent.allSatisfy { $0.push.traceContext == context })
    }

    @Test("tracing changes nothing the machine decides or sends")
    func sameDecisions() throws {
        var plain = try harness()
        var traced = try harness()
        for offset in 0..<20 {
            let json = Self.update(offset)
            plain.command(Int64(offset), json)
            traced.command(Int64(offset), json, trace: try Self.context(UInt64(offset) + 1))
            plain.advance(by: 0.07)
            traced.advance(by: 0.07)
        }
        plain.advance(by: 2)
        traced.advance(by: 2)
        #expect(plain.sent.map(\.payload) == traced.sent.map(\.payload))
        #expect(plain.sent.map(\.token) == traced.sent.map(\.token))
        // The same records; a traced push's snapshot names its trace.
        #expect(plain.produced == traced.produced.map { var produce = $0; produce.trace = nil; return produce })
        #expect(traced.produced.contains { $0.topic == .state && $0.trace?.isSampled == true })
        #expect(plain.produced.allSatisfy { $0.trace == nil })
        #expect(plain.commits == traced.commits)
        let tracedObservations = traced.observations.filter { if case .pushTraced = $0 { false } else { true } }
        #expect(plain.observations == tracedObservations)
        #expect(!plain.observations.contains { if case .pushTraced = $0 { true } else { false } })
        #expect(plain.sent.allSatisfy { $0.push.traceContext == nil })
    }

    @Test("a traced push's sends name their attempt")
    func attempts() throws {
        var harness = try harness()
        final class Answers { var count = 0 }
        let answers = Answers()
        // The first answer to each token is a throttle, the second a delivery.
        harness.outcome = { send in
            answers.count += 1
            return answers.count <= 2 ? .retryable(reason: "429 TooManyRequests", after: nil) : .delivered
        }
        harness.command(0, Self.update(1), trace: try Self.context(1))
        harness.advance(by: 0.3)
        harness.advance(by: 60)
        #expect(harness.sent.map(\.attempt) == [1, 1, 2, 2])
        #expect(harness.observations.contains { if case .pushTraced = $0 { true } else { false } })
    }

    @Test("a push keeps the newest traced commands, up to the limit")
    func limit() throws {
        var harness = try harness()
        let count = CommandTrace.limitPerPush + 36
        for offset in 0..<count {
            harness.command(Int64(offset), Self.update(offset), trace: try Self.context(UInt64(offset) + 1))
        }
        harness.advance(by: 2)
        let trace = try #require(harness.observations.compactMap { if case .pushTraced(let trace) = $0 { trace } else { nil } }.first)
        #expect(trace.traces.map(\.offset) == Array(36..<Int64(count)))
        #expect(trace.commands == count)
    }

    @Test("two flushes held back as one keep the traces of both")
    func mergedFlushes() throws {
        let match = try ActivityID("match-42")
        func flush(_ version: UInt64, _ traces: [CommandTrace]) -> Coalescer.Flush {
            var flush = Coalescer.Flush(
                push: LiveActivityPush(activityID: match, version: version, event: .update, contentState: [:], timestamp: UnixTime(seconds: 1)),
                snapshot: ActivityState(activityID: match, createdAt: UnixTime(seconds: 1)), offsets: [Int64(version)])
            if !traces.isEmpty { flush.trace(traces) }
            return flush
        }
        let older = CommandTrace(context: try Self.context(1), offset: 1, heldSince: UnixTime(seconds: 1))
        let newer = CommandTrace(context: try Self.context(2), offset: 2, heldSince: UnixTime(seconds: 2))
        let merged = Coalescer.Flush.merged(flush(1, [older]), flush(2, [newer]))
        #expect(merged.traces == [older, newer])
        #expect(merged.push.traceContext == PushTrace.pushContext(parent: newer.context, activityID: match, version: 2))
        let untracedNewer = Coalescer.Flush.merged(flush(1, [older]), flush(2, []))
        #expect(untracedNewer.traces == [older])
        #expect(untracedNewer.push.traceContext == PushTrace.pushContext(parent: older.context, activityID: match, version: 2))
    }
}
