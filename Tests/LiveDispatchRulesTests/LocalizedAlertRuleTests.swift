import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

@Suite("Rules with localized alerts")
struct LocalizedAlertRuleTests {
    let now = UnixTime(seconds: 1_770_000_000)

    func file(title: String) -> String {
        """
        version: 1
        activity_types:
          Match:
            content_state:
              score: int
        rules:
          - name: goal
            topic: sports.scores
            activity_id: "match-{{ event.id }}"
            activity_type: Match
            set:
              score: event.score
            alert:
              title: \(title)
              body: "{{ event.scorer }} scores"
        """
    }

    func diagnostics(_ text: String) -> [String] { ruleDiagnostics("goal.yaml", text) }

    @Test("a title given as loc_key and loc_args templates becomes a localized text of the command")
    func localizedTitle() throws {
        let rules = try RuleSet.compile(files: [("goal.yaml", file(title: #"{loc_key: "GOAL_{{ event.kind }}", loc_args: ["{{ event.scorer }}", "{{ event.minute }}"]}"#))])
        let outcomes = rules.evaluate(
            EventRecord(topic: "sports.scores", offset: 3, timestamp: now), event: ["id": "7", "score": 2, "scorer": "Ada", "minute": 67, "kind": "PENALTY"], now: now)
        guard case .command(let command) = outcomes.first else {
            Issue.record("expected a command, got \(outcomes)")
            return
        }
        #expect(command.alert?.title == .localized(key: "GOAL_PENALTY", arguments: ["Ada", "67"]))
        #expect(command.alert?.body == "Ada scores")
        #expect(command.json["alert"]?["title"] == ["loc_key": "GOAL_PENALTY", "loc_args": ["Ada", "67"]])
    }

    @Test("a localized title without a key, with an unknown key, or with a list that is not one is refused at its position")
    func refused() {
        #expect(diagnostics(file(title: #"{loc_args: ["x"]}"#)) == [
            "goal.yaml:14:14: rule goal: missing key 'loc_key' in alert.title (expected text, or a mapping with loc_key and optionally loc_args)",
        ])
        #expect(diagnostics(file(title: #"{loc_key: GOAL, args: []}"#)).count == 1)
        #expect(diagnostics(file(title: #"{loc_key: GOAL, args: []}"#)).first?.contains("args") == true)
        #expect(diagnostics(file(title: #"{loc_key: GOAL, loc_args: "{{ event.scorer }}"}"#)) == [
            "goal.yaml:14:40: rule goal: alert.title.loc_args is a scalar (expected a list of at most 16 templates)",
        ])
        #expect(diagnostics(file(title: #"{loc_key: GOAL, loc_args: ["{{ event. }}"]}"#)).first?.contains("alert.title.loc_args[0]") == true)
    }
}
