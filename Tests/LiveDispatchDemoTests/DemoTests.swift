import Foundation
import LiveDispatchCore
@testable import LiveDispatchDemo
import Testing

@Suite("Demo scenarios")
struct DemoTests {
    static let examples = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Config/examples").path

    @Test("the shipped scenarios load, merged in time order")
    func shippedScenarios() throws {
        let scenario = try Scenario.load(path: Self.examples)
        #expect(scenario.steps.count == 30)
        #expect(scenario.steps.map(\.after) == scenario.steps.map(\.after).sorted())
        #expect(scenario.steps.contains { $0.destination == .internalTopic(.tokens) })
        #expect(scenario.steps.contains { $0.destination == .domain("sports.scores") })
        #expect(scenario.steps.contains { $0.destination == .internalTopic(.commands) && $0.value["audiences"] != nil })
    }

    @Test("${now±duration} placeholders become ISO-8601 times")
    func placeholders() throws {
        let step = try Scenario.parseStep(#"{"after": "1s", "topic": "t", "value": {"eta": "${now+12m}", "at": "${now}", "was": ["${now-1h}"], "keep": "${later}"}}"#, source: "x:1")
        let value = try JSONValue.parse(step.renderedValue(now: UnixTime(seconds: 1_764_000_000)))
        #expect(value == ["eta": "2025-11-24T16:12:00Z", "at": "2025-11-24T16:00:00Z", "was": ["2025-11-24T15:00:00Z"], "keep": "${later}"])
    }

    @Test(
        "bad scenario lines are refused with file:line",
        arguments: [
            (#"{"after": "soon", "topic": "t", "value": {}}"#, "x.jsonl:3: 'after' must be a duration such as 0.5s or 250ms"),
            (#"{"after": "1s", "stream": "nope", "value": {}}"#, "x.jsonl:3: 'stream' must be one of commands, tokens, state, token-store, dead-letters, starts, channels, outcomes"),
            (#"{"after": "1s", "topic": "t", "stream": "tokens", "value": {}}"#, "x.jsonl:3: give exactly one of 'topic' (a domain topic) or 'stream' (an internal topic)"),
            (#"{"after": "1s", "topic": "t"}"#, "x.jsonl:3: 'value' is required"),
            (#"{"after": "1s", "topic": "t", "value": {}, "delay": 1}"#, "x.jsonl:3: unknown field 'delay' (known: after, key, stream, topic, value)"),
            (#"{"after": "1s", "topic": "t", "value": {}"#, "x.jsonl:3:42: unexpected end of input, expected ',' or '}' in an object"),
        ])
    func badLines(line: String, message: String) {
        #expect(throws: ScenarioError(message)) { try Scenario.parseStep(line, source: "x.jsonl:3") }
    }
}
