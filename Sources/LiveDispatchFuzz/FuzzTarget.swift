@_spi(Fuzzing) import LiveDispatchRules
import LiveDispatchCore

/// What each fuzz target feeds its input to. A target returns normally for
/// any input; a crash, a failed invariant (`precondition`), a timeout or an
/// out-of-memory is a finding.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// The JSON parser: parse, and serializing what was parsed is stable.
    case json
    /// Command decoding, then the coalescer and the APNs payload encoder.
    case command
    /// Token-registration decoding.
    case registration
    /// The expression parser, compiler, evaluator and explainer; templates.
    case expression
    /// A rule file (YAML, expressions, templates) and, after a NUL byte, an
    /// event evaluated and explained with the rules that compiled.
    case rules

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
            guard let command = try? ActivityCommand(bytes: bytes) else { return }
            _ = try? ActivityCommand(bytes: command.json.serialized())
            var coalescer = Coalescer()
            _ = coalescer.receive(command, offset: 0, recordTime: Self.now, now: Self.now)
            for flush in coalescer.flushAll() { _ = try? APNsPayload.encode(flush.push) }
        case .registration:
            guard let registration = try? TokenRegistration(bytes: bytes) else { return }
            precondition((try? TokenRegistration(json: registration.json)) != nil, "a decoded registration does not decode again")
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
        }
    }
}
