import LiveDispatchCore
@testable import LiveDispatchRules
import Testing

@Suite("Exact numbers in events")
struct ExactNumberEventTests {
    @Test("an event with a number that cannot be carried exactly fails naming the field, not rounded into a command")
    func refused() throws {
        let rules = try RuleSet.load(directory: RulePaths.shippedRules)
        for number in ["18446744073709551616", "9223372036854775809", "1e-400"] {
            let event = #"{"type": "goal", "match_id": "m", "score": {"home": \#(number), "away": 0}}"#
            guard case .failure(let failure) = rules.evaluate(record("sports.scores"), value: Array(event.utf8), now: now).first else {
                Issue.record("expected a failure for \(number)")
                continue
            }
            #expect(failure.code == .invalidEvent)
            #expect(failure.reason.hasPrefix("the event's field score.home: "), "\(failure.reason)")
            #expect(failure.reason.contains(number))
        }
    }
}
