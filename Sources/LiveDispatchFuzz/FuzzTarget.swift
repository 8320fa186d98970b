@_spi(Fuzzing) import APNs
import Foundation
@_spi(Fuzzing) import LiveDispatchRules
import LiveDispatchCore
import LiveDispatchTracing
import LiveDispatchWorker

/// What each fuzz target feeds its input to. A target returns normally for
/// any input; a crash, a failed invariant (`precondition`), a timeout or an
/// out-of-memory is a finding.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// The JSON parser: parse, and serializing what was parsed is stable.
    case json
    /// Command decoding, then the coalescer and the APNs payload encoder.
    case command
    /// Token-registration (both kinds) and audience-start decoding.
    case registration
    /// The expression parser, compiler, evaluator and explainer; templates.
    case expression
    /// A rule file (YAML, expressions, templates) and, after a NUL byte, an
    /// event evaluated and explained with the rules that compiled.
    case rules
    /// The configuration loader: YAML, keys, validation. Every problem has a
    /// position.
    case config
    /// APNs response classification: a status line, `name: value` header
    /// lines, an empty line, then the body.
    case apns
    /// HTTP/1.1 requests as sent on a connection: parsed by the server's
    /// decoder and routed through the worker's real router. No request
    /// answers 500, and none runs a handler behind a key without one.
    case http
    /// W3C trace context: a `traceparent` header, and after a newline a
    /// `tracestate`. What is read writes a header that reads back the same,
    /// and a span of that context encodes for OTLP.
    case tracing

    static let now = UnixTime(seconds: 1_770_593_400)

    func run(_ bytes: [UInt8]) {
        switch self {
        case .json:
            guard let value = try? JSONValue.parse(bytes) else { return }
            let once = value.serialized()
            guard let again = try? JSONValue.parse(once) else {
                preconditionFailure("serialized JSON does not parse: \(String(decoding: once, as: UTF8.self))")
            }
            precondition(again.serialized() == once, "serializing is not stable")
        case .command:
            // The router's commands are read member by member, the rest through the tree: the same either way.
            let read = try? ActivityCommand(bytes: bytes)
            let throughTree = (try? JSONValue.parse(bytes)).flatMap { try? ActivityCommand(json: $0) }
            precondition(read == throughTree, "a command read from its bytes differs from the one read through the JSON tree")
            guard let command = read else { return }
            _ = try? ActivityCommand(bytes: command.json.serialized())
            var coalescer = Coalescer()
            _ = coalescer.receive(command, offset: 0, recordTime: Self.now, now: Self.now)
            for flush in coalescer.flushAll(now: Self.now) { _ = try? APNsPayload.encode(flush.push) }
        case .registration:
            // The same bytes as an audience start (the `starts` topic's decoder).
            if let start = try? AudienceStart(bytes: bytes) {
                precondition((try? AudienceStart(json: start.json)) != nil, "a decoded audience start does not decode again")
            }
            guard let record = try? TokenRecord(bytes: bytes) else { return }
            precondition((try? TokenRecord(json: record.json)) != nil, "a decoded registration does not decode again")
        case .expression:
            let event = (try? JSONValue.parse(Array(#"{"a": 1, "s": "Ab", "l": [1, 2], "m": {"x": null}, "d": 1.5}"#.utf8))) ?? .null
            RuleSet.fuzzExpression(String(decoding: bytes, as: UTF8.self), event: event)
        case .rules:
            let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
            let text = String(decoding: bytes[..<split], as: UTF8.self)
            let event = split < bytes.endIndex ? Array(bytes[(split + 1)...]) : Array(#"{"type": "goal"}"#.utf8)
            guard let rules = try? RuleSet.compile(files: [("fuzz.yaml", text)]) else { return }
            for topic in rules.topics.sorted() {
                let record = EventRecord(topic: topic, partition: 0, offset: 1, key: "k", timestamp: Self.now)
                _ = rules.evaluate(record, value: event, now: Self.now)
                _ = rules.explain(record, value: event, now: Self.now)
            }
        case .config:
            do {
                _ = try WorkerConfiguration.parse(yaml: String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml")
            } catch {
                for problem in error.problems {
                    let parts = problem.location.split(separator: ":", omittingEmptySubsequences: false)
                    precondition(
                        parts.count == 3 && parts[0] == "fuzz.yaml" && parts.dropFirst().allSatisfy { Int($0) != nil },
                        "a configuration problem without file:line:column: \(problem)")
                }
            }
        case .apns:
            let text = String(decoding: bytes, as: UTF8.self)
            let (head, body) = text.split(separator: "\n\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init).splitFirst()
            var lines = head.split(separator: "\n").map(String.init)
            let status = lines.isEmpty ? 200 : Int(lines.removeFirst().prefix(6)) ?? 500
            var headers: [String: String] = [:]
            for line in lines {
                let pair = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2 { headers[pair[0].lowercased()] = pair[1] }
            }
            _ = APNsOutcome.classify(status: status, headers: headers, body: Array(body.utf8)).label
        case .http:
            HTTPRequests.check(bytes)
        case .tracing:
            let split = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            let state = split < bytes.endIndex ? Array(bytes[(split + 1)...]) : nil
            guard let context = TraceContext(traceparent: Array(bytes[..<split]), tracestate: state) else { return }
            precondition(
                TraceContext(traceparent: context.traceparent, tracestate: context.traceState) == context,
                "a trace context does not read back from the headers it writes")
            let text = String(decoding: bytes, as: UTF8.self)
            let span = SpanRecord(
                context: context, parentSpanID: context.spanID, name: text, kind: .consumer, startNanoseconds: 1, endNanoseconds: 0,
                attributes: [.init(text, .string(text)), .init("n", .int(Int64(bytes.count) - 100))], links: [.init(context: context)],
                status: .error(message: text))
            precondition(!OTLPTraceEncoding.exportRequest([span], resource: []).isEmpty, "an empty export")
        }
    }
}

extension Array where Element == String {
    /// The first element and the second (or empty ones).
    func splitFirst() -> (String, String) {
        (first ?? "", count > 1 ? self[1] : "")
    }
}
