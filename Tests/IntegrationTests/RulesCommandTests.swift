import Foundation
import Testing

/// `livedispatch rules ...` run as a process, as rule authors run it.
@Suite("livedispatch rules as a process")
struct RulesCommandTests {
    static var shippedRules: String { TestPaths.repositoryRoot.appendingPathComponent("Config/rules").path }

    /// A rules directory with one small rule file and the given fixture.
    static func rulesDirectory(fixture: String? = nil, rules: String = matchRules) throws -> URL {
        let directory = try TestPaths.temporaryDirectory("rules")
        try rules.write(to: directory.appendingPathComponent("match.yaml"), atomically: true, encoding: .utf8)
        if let fixture {
            let tests = directory.appendingPathComponent("tests")
            try FileManager.default.createDirectory(at: tests, withIntermediateDirectories: true)
            try fixture.write(to: tests.appendingPathComponent("match.yaml"), atomically: true, encoding: .utf8)
        }
        return directory
    }

    static let matchRules = """
        version: 1
        activity_types:
          Match:
            content_state:
              teamOneScore: int
              teamTwoScore: int
        rules:
          - name: goal
            topic: sports.scores
            when: event.type == "goal" && event.minute >= 0
            activity_id: "match-{{ event.match_id }}"
            activity_type: Match
            set:
              teamOneScore: event.home
              teamTwoScore: event.away
        """

    @Test("rules test passes the shipped fixtures and exits 0")
    func shippedFixturesPass() throws {
        let result = try runProcess(["rules", "test", Self.shippedRules])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("PASS "))
        #expect(!result.standardOutput.contains("FAIL "))
        #expect(result.standardOutput.hasSuffix(" passed, 0 failed\n"))
    }

    @Test("rules test prints a readable diff for a failing case and exits 1")
    func failingFixture() throws {
        let fixture = """
            version: 1
            now: "2026-02-08T23:30:00Z"
            cases:
              - name: goal for the home side
                topic: sports.scores
                event: {type: goal, match_id: 9, minute: 3, home: 1, away: 0}
                expect:
                  commands:
                    - rule: goal
                      command: {activity_id: match-9, content_state: {teamOneScore: 2, teamTwoScore: 0}, timestamp: "2026-02-08T23:30:00Z"}
              - name: kickoff is no goal
                topic: sports.scores
                event: {type: kickoff, match_id: 9}
                expect: no_match
            """
        let directory = try Self.rulesDirectory(fixture: fixture)
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try runProcess(["rules", "test", directory.path])
        #expect(result.status == 1)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let fixturePath = directory.appendingPathComponent("tests/match.yaml").path
        #expect(lines == [
            "FAIL \(fixturePath):4:5: goal for the home side",
            "    command 1: content_state.teamOneScore: expected 2, got 1",
            "PASS \(fixturePath):11:5: kickoff is no goal",
            "1 passed, 1 failed",
        ])
    }

    @Test("rules explain says which rule matched, which part of when was false, and the commands")
    func explain() throws {
        let directory = try Self.rulesDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let event = directory.appendingPathComponent("event.json")
        try #"{"type": "goal", "match_id": 9, "minute": -1, "home": 1, "away": 0}"#.write(to: event, atomically: true, encoding: .utf8)
        let result = try runProcess([
            "rules", "explain", "--topic", "sports.scores", "--event", event.path, "--rules", directory.path,
            "--now", "2026-02-08T23:30:00Z",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == """
            topic sports.scores: 1 of 1 rules read it
            rule goal: not matched
              because `event.minute >= 0` was false (`event.minute` is -1)

            """)

        try #"{"type": "goal", "match_id": 9, "minute": 3, "home": 1, "away": 0}"#.write(to: event, atomically: true, encoding: .utf8)
        let matched = try runProcess([
            "rules", "explain", "--topic", "sports.scores", "--event", event.path, "--rules", directory.path,
            "--now", "2026-02-08T23:30:00Z", "--key", "9",
        ])
        #expect(matched.status == 0)
        #expect(matched.standardOutput.contains("rule goal: matched, 1 command\n"))
        #expect(matched.standardOutput.contains(#""activity_id":"match-9""#))
        #expect(matched.standardOutput.contains(#""content_state":{"teamOneScore":1,"teamTwoScore":0}"#))
    }

    @Test("rules explain of the shipped rules on a delivery event")
    func explainShipped() throws {
        let directory = try TestPaths.temporaryDirectory("explain")
        defer { try? FileManager.default.removeItem(at: directory) }
        let event = directory.appendingPathComponent("delivered.json")
        try #"{"order_id": "A-1", "status": "delivered", "restaurant": "Owl Pizza"}"#.write(to: event, atomically: true, encoding: .utf8)
        let result = try runProcess([
            "rules", "explain", "--topic", "delivery.orders", "--event", event.path, "--rules", Self.shippedRules,
            "--now", "2026-02-08T19:30:00Z",
        ])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("rule delivered: matched, 1 command\n"))
        #expect(result.standardOutput.contains("because `event.status == \"arriving\"` was false (`event.status` is \"delivered\")"))
        #expect(result.standardOutput.contains("rule goal-scored: skipped, reads sports.scores"))
    }

    @Test("rules check reports problems with positions and exits 1; --format json for tooling")
    func check() throws {
        let broken = Self.matchRules.replacingOccurrences(of: "teamOneScore: event.home", with: "teamOneScore: '\"one\"'")
        let directory = try Self.rulesDirectory(rules: broken)
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try runProcess(["rules", "check", directory.path])
        #expect(result.status == 1)
        let file = directory.appendingPathComponent("match.yaml").path
        #expect(result.standardOutput == "\(file):14:22: rule goal: set.teamOneScore is a string (expected int)\n")
        let json = try runProcess(["rules", "check", directory.path, "--format", "json"])
        #expect(json.status == 1)
        #expect(json.standardOutput.contains(#""column":22"#))
        #expect(json.standardOutput.contains(#""ok":false"#))

        let good = try runProcess(["rules", "check", Self.shippedRules])
        #expect(good.status == 0)
    }

    @Test("rules check refuses expression chains too long to walk, with file:line:column, and does not crash")
    func longChains() throws {
        let chains = [
            ("1+1+…", Array(repeating: "1", count: 10_000).joined(separator: "+"), 10_000),
            ("&&", Array(repeating: "event.a", count: 1_000).joined(separator: " && "), 2_000),
            ("??", Array(repeating: "event.a", count: 1_000).joined(separator: " ?? "), 2_000),
            (".a.a…", "event" + String(repeating: ".a", count: 1_999), 2_000),
            ("[0][0]…", "event.list" + String(repeating: "[0]", count: 1_998), 2_000),
            (".lower()…", "event.s" + String(repeating: ".lower()", count: 1_998), 2_000),
        ]
        for (name, expression, terms) in chains {
            let rules = Self.matchRules.replacingOccurrences(
                of: #"when: event.type == "goal" && event.minute >= 0"#, with: "when: \(expression)")
            let directory = try Self.rulesDirectory(rules: rules)
            defer { try? FileManager.default.removeItem(at: directory) }
            let result = try runProcess(["rules", "check", directory.path])
            let file = directory.appendingPathComponent("match.yaml").path
            #expect(result.status == 1, "\(name): \(result.standardError)")
            #expect(
                result.standardOutput.hasPrefix("\(file):10:")
                    && result.standardOutput.contains(": rule goal: when: expression too long (\(terms) terms, limit 256)"),
                "\(name): \(result.standardOutput.prefix(300))")
        }
    }

    @Test("rules check refuses a YAML alias bomb fast, with file:line:column")
    func aliasBomb() throws {
        var lines = ["version: 1", "a: &a [" + Array(repeating: "\"lol\"", count: 10).joined(separator: ", ") + "]"]
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        for (previous, name) in zip(names, names.dropFirst()) {
            lines.append("\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]")
        }
        lines.append("rules: [*i]")
        let directory = try Self.rulesDirectory(rules: lines.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let start = ContinuousClock.now
        let result = try runProcess(["rules", "check", directory.path])
        #expect(ContinuousClock.now - start < .seconds(30))
        let file = directory.appendingPathComponent("match.yaml").path
        #expect(result.status == 1, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("\(file):7:8: the YAML expands to more than 200000 nodes"), "\(result.standardOutput)")
    }

    @Test("rules schema prints a JSON Schema")
    func schema() throws {
        let result = try runProcess(["rules", "schema"])
        #expect(result.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        #expect(object?["title"] as? String == "LiveDispatch rule file")
    }
}
