import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

/// Every file under `Broken/` is a rule file with known problems; each test
/// asserts the exact `file:line:column` messages `rules check` prints.
@Suite("Broken rule files")
struct BrokenRuleFileTests {
    static let functions = "abs, bool, contains, date, double, duration, endsWith, ends_with, format_duration, int, len, lower, max, min, minutes_between, now, round, size, startsWith, starts_with, string, upper, has"

    static let cases: [(file: String, messages: [String])] = [
        ("bad-yaml.yaml", ["bad-yaml.yaml:5:4: invalid YAML: did not find expected '-' indicator while parsing a block collection"]),
        ("unknown-key.yaml", ["unknown-key.yaml:12:5: rule goal: unknown key 'wen' in a rule (expected 'when')"]),
        ("duplicate-rule-name.yaml", ["duplicate-rule-name.yaml:14:11: rule goal: duplicate rule name, first declared at duplicate-rule-name.yaml:10:5 (expected unique rule names)"]),
        ("expression-syntax.yaml", ["expression-syntax.yaml:12:34: rule goal: when: unexpected end of the expression (expected a value, a name or '(')"]),
        ("unknown-function.yaml", ["unknown-function.yaml:12:11: rule goal: when: unknown function 'lowercase' (expected \(functions))"]),
        ("type-mismatch.yaml", ["type-mismatch.yaml:15:22: rule goal: set.teamOneScore is a string (expected int)"]),
        ("bad-template.yaml", ["bad-template.yaml:12:25: rule goal: activity_id: '{{' is not closed (expected '}}' after the expression)"]),
        ("missing-required-key.yaml", ["missing-required-key.yaml:10:5: rule goal: missing key 'activity_id' (expected a template such as \"match-{{ event.match_id }}\")"]),
        ("unknown-activity-type.yaml", ["unknown-activity-type.yaml:13:20: rule goal: unknown activity type 'Matsh' (expected one of Match)"]),
        ("unknown-field.yaml", ["unknown-field.yaml:15:7: rule goal: set.teamOneScor is not a field of the schema (expected 'teamOneScore')"]),
        ("bad-priority.yaml", ["bad-priority.yaml:14:15: rule goal: priority 7 is not allowed (expected 5 or 10)"]),
        ("wrong-version.yaml", ["wrong-version.yaml:1:10: unsupported version '2' (expected version: 1)"]),
        ("unknown-schema-type.yaml", ["unknown-schema-type.yaml:5:21: unknown type 'integer' for content_state.teamOneScore (expected int, double, string, bool, date, enum(a, b), a mapping for an object or [type] for a list, with ? for optional)"]),
        ("double-to-int.yaml", ["double-to-int.yaml:15:21: rule goal: set.teamTwoScore is a double (expected int; convert with round() or int())"]),
        ("unquoted-string.yaml", ["unquoted-string.yaml:15:15: rule half-time: set.period: unknown name 'second_half' (expected event, key, topic, headers, timestamp; a string literal needs quotes inside the expression, e.g. '\"text\"')"]),
        ("duplicate-key.yaml", ["duplicate-key.yaml:12:5: duplicate key 'when' in a mapping (expected each key once)"]),
        ("enum-literal.yaml", ["enum-literal.yaml:15:16: rule overtime: set.period \"overtime\" is not a member of the enum (expected one of first_half, second_half)"]),
        ("single-equals.yaml", ["single-equals.yaml:12:22: rule goal: when: unexpected '=' (expected '==' to compare)"]),
        ("item-outside-for-each.yaml", ["item-outside-for-each.yaml:12:26: rule fan-alert: activity_id: unknown name 'item' ('item' exists only in rules with for_each) (expected event, key, topic, headers, timestamp)"]),
        ("start-incomplete.yaml", [
            "start-incomplete.yaml:10:5: rule kickoff: a start needs an alert (expected alert with title and body)",
            "start-incomplete.yaml:16:7: rule kickoff: a start must set every required field; missing teamTwoScore, period (expected set to cover the whole content_state of Match)",
        ]),
        ("block-scalar.yaml", ["block-scalar.yaml:14:9: rule goal: when: unknown function 'nope' (expected \(functions))"]),
        ("quoted-escape.yaml", ["quoted-escape.yaml:12:39: rule goal: when: unknown function 'nope' (expected \(functions))"]),
        ("bad-duration.yaml", ["bad-duration.yaml:14:34: rule goal: stale_date: \"15 minutes\" is not a duration (expected a duration such as \"15m\", \"1h30m\" or \"90s\")"]),
        ("when-not-bool.yaml", ["when-not-bool.yaml:12:11: rule goal: when is an int (expected a bool)"]),
    ]

    static var brokenDirectory: URL {
        Bundle.module.url(forResource: "Broken", withExtension: nil)
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Broken")
    }

    static func diagnostics(of file: String) throws -> [String] {
        let text = try String(contentsOf: brokenDirectory.appendingPathComponent(file), encoding: .utf8)
        do {
            _ = try RuleSet.compile(files: [(file, text)])
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    @Test("each broken file gives its exact file:line:column messages", arguments: cases.map(\.file))
    func exactMessages(file: String) throws {
        let expected = try #require(Self.cases.first { $0.file == file }).messages
        #expect(try Self.diagnostics(of: file) == expected)
    }

    @Test("the corpus has at least 15 files and every file is covered")
    func corpusIsComplete() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.brokenDirectory.path).filter { $0.hasSuffix(".yaml") }
        #expect(files.count >= 15)
        #expect(Set(files) == Set(Self.cases.map(\.file)))
    }

    @Test("all problems of all files are reported at once, sorted by position")
    func allAtOnce() throws {
        var files: [(name: String, text: String)] = []
        for file in ["type-mismatch.yaml", "unknown-key.yaml"] {
            files.append((file, try String(contentsOf: Self.brokenDirectory.appendingPathComponent(file), encoding: .utf8)))
        }
        // Both files declare `Match`, so the second declaration is a problem too.
        let error = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: files) }
        let messages = error.diagnostics.map(\.description)
        #expect(messages.contains("type-mismatch.yaml:15:22: rule goal: set.teamOneScore is a string (expected int)"))
        #expect(messages.contains("unknown-key.yaml:12:5: rule goal: unknown key 'wen' in a rule (expected 'when')"))
        #expect(messages.contains { $0.hasPrefix("unknown-key.yaml:3:3: activity type 'Match' is already declared at type-mismatch.yaml:3:3") })
        #expect(error.diagnostics == error.diagnostics.sorted())
    }

    @Test("diagnostics have a JSON form for tooling")
    func jsonForm() throws {
        let text = try String(contentsOf: Self.brokenDirectory.appendingPathComponent("bad-priority.yaml"), encoding: .utf8)
        let error = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("bad-priority.yaml", text)]) }
        #expect(error.diagnostics.first?.json == [
            "file": "bad-priority.yaml", "line": 14, "column": 15, "rule": "goal",
            "message": "priority 7 is not allowed", "expected": "5 or 10",
        ])
    }
}
