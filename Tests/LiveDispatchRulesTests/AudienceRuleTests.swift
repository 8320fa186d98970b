import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

@Suite("Rules that start activities on audiences")
struct AudienceRuleTests {
    let now = UnixTime(seconds: 1_770_000_000)

    func file(event: String = "start", audiences: String) -> String {
        """
        version: 1
        activity_types:
          Match:
            attributes:
              home: string
            content_state:
              score: int
        rules:
          - name: kickoff
            topic: sports.scores
            activity_id: "match-{{ event.id }}"
            activity_type: Match
            event: \(event)
            attributes:
              home: event.home
            set:
              score: 0
            alert:
              title: "Kick-off"
              body: "{{ event.home }}"
            audiences: \(audiences)
        """
    }

    func diagnostics(_ text: String) -> [String] { ruleDiagnostics("kickoff.yaml", text) }

    @Test("a start rule names its audiences as templates; each becomes an audience key of the command")
    func audiences() throws {
        let rules = try RuleSet.compile(files: [("kickoff.yaml", file(audiences: #"["followers:{{ event.home }}", "match-{{ event.id }}-fans"]"#))])
        let record = EventRecord(topic: "sports.scores", offset: 7, timestamp: now)
        let outcomes = rules.evaluate(record, event: ["id": "9", "home": "owls"], now: now)
        guard case .command(let command) = outcomes.first else {
            Issue.record("expected a command, got \(outcomes)")
            return
        }
        #expect(command.event == .start)
        #expect(command.audiences.map(\.rawValue) == ["followers:owls", "match-9-fans"])
        let failed = rules.evaluate(record, event: ["id": "9", "home": "owls\u{1}"], now: now)
        guard case .failure(let failure) = failed.first else {
            Issue.record("an audience key with a control character must fail the rule, got \(failed)")
            return
        }
        #expect(failure.reason.contains("audiences[0]"))
    }

    @Test("a start rule may be broadcast with a storage policy; outside a start, or a bad policy, is refused")
    func broadcast() throws {
        let broadcastFile = file(audiences: #"["fans"]"#) + "\n    broadcast: true\n    storage_policy: no-storage"
        let rules = try RuleSet.compile(files: [("kickoff.yaml", broadcastFile)])
        let record = EventRecord(topic: "sports.scores", offset: 7, timestamp: now)
        guard case .command(let command) = rules.evaluate(record, event: ["id": "9", "home": "owls"], now: now).first else {
            Issue.record("expected a command")
            return
        }
        #expect(command.broadcast == true)
        #expect(command.storagePolicy == .noStorage)
        let update = file(event: "update", audiences: "[]").replacingOccurrences(of: "    audiences: []", with: "    broadcast: true")
        #expect(diagnostics(update).contains { $0.contains("broadcast is only for a start") })
        let badPolicy = file(audiences: #"["fans"]"#) + "\n    broadcast: true\n    storage_policy: forever"
        #expect(diagnostics(badPolicy).contains { $0.contains("storage_policy is 'forever'") })
    }

    @Test("audiences outside a start, not a list, or a constant that is no audience key are refused with their position")
    func refused() {
        #expect(diagnostics(file(event: "update", audiences: #"["fans"]"#)).contains { $0.contains("audiences are only for a start") })
        #expect(diagnostics(file(audiences: "fans")).contains { $0.contains("audiences is a scalar") })
        #expect(diagnostics(file(audiences: "[]")).contains { $0.contains("audiences is a list") })
        #expect(diagnostics(file(audiences: "[\"a\\u0001\"]")).contains { $0.contains("audiences[0] is not an audience key") })
    }
}
