import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

enum RulePaths {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let shippedRules = repositoryRoot.appendingPathComponent("Config/rules").path

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("rules-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// A small rule file for the tests below.
let followersRules = """
    version: 1
    activity_types:
      Match:
        content_state:
          teamOneScore: int
          teamTwoScore: int
          updatedAt?: date
          tags?: [string]
          venue?:
            name: string
            capacity?: int
    rules:
      - name: fan-out
        topic: [sports.scores, sports.replays]
        when: event.type == "goal"
        for_each: event.followers
        activity_id: "fan-{{ item }}-{{ index }}"
        activity_type: Match
        set:
          teamOneScore: event.home
          teamTwoScore: event.away
          updatedAt: now()
          tags: event.tags ?? null
          venue:
            name: event.venue ?? "unknown"
        priority: 'event.home + event.away > 3 ? 10 : 5'
        timestamp: date(event.at)
        stale_after: duration("1m") * 2
    """

let now = UnixTime(seconds: 1_770_593_400)

func record(_ topic: String, offset: Int64 = 7) -> EventRecord {
    EventRecord(topic: topic, partition: 3, offset: offset, key: "k", timestamp: UnixTime(seconds: 1_770_593_000))
}

@Suite("Rule sets")
struct RuleSetTests {
    @Test("the shipped sports and delivery rules compile and read their topics")
    func shippedRules() throws {
        let rules = try RuleSet.load(directory: RulePaths.shippedRules)
        #expect(rules.topics == ["sports.scores", "delivery.orders"])
        #expect(rules.ruleNames.contains("goal-scored"))
        #expect(rules.ruleNames.contains("delivered"))
    }

    @Test("the shipped fixtures all pass")
    func shippedFixtures() throws {
        let rules = try RuleSet.load(directory: RulePaths.shippedRules)
        let files = try RuleSet.readFiles(directory: RulePaths.shippedRules + "/tests")
        #expect(files.count == 2)
        for file in files {
            let results = try RuleFixtures.run(file: file.name, text: file.text, rules: rules).get()
            #expect(results.count >= 10)
            for result in results { #expect(result.differences == [], "\(result.name)") }
        }
    }

    @Test("a goal becomes one command with its source, from the record bytes")
    func goalCommand() throws {
        let rules = try RuleSet.load(directory: RulePaths.shippedRules)
        let value = Array(#"{"type":"goal","match_id":"m1","minute":5,"scoring_team":"Owls","scorer":"Ada","score":{"home":1,"away":0}}"#.utf8)
        let outcomes = rules.evaluate(
            topic: "sports.scores", partition: 2, offset: 99, key: "m1", headers: [:], timestamp: now, value: value, now: now)
        guard outcomes.count == 1, case .command(let command) = outcomes[0] else {
            Issue.record("expected one command, got \(outcomes)")
            return
        }
        #expect(command.activityID.rawValue == "match-m1")
        #expect(command.contentState == ["teamOneScore": 1, "teamTwoScore": 0, "minute": 5, "lastScorer": "Ada"])
        #expect(command.source == CommandSource(topic: "sports.scores", partition: 2, offset: 99, rule: "goal-scored"))
        #expect(command.priority == .immediate)
        #expect(command.staleDate == now + 600)
    }

    @Test("for_each makes one command per element; nested objects, lists and dates follow the schema")
    func forEach() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        #expect(rules.topics == ["sports.scores", "sports.replays"])
        let event: JSONValue = ["type": "goal", "followers": ["ann", "bob", "cy"], "home": 3, "away": 1, "at": "2026-02-08T23:00:00Z", "tags": ["final"]]
        let outcomes = rules.evaluate(record("sports.replays"), event: event, now: now)
        let commands = outcomes.compactMap { outcome -> ActivityCommand? in
            if case .command(let command) = outcome { return command }
            return nil
        }
        #expect(commands.map(\.activityID.rawValue) == ["fan-ann-0", "fan-bob-1", "fan-cy-2"])
        let first = try #require(commands.first)
        #expect(first.contentState == [
            "teamOneScore": 3, "teamTwoScore": 1, "updatedAt": .double(now.seconds - 978_307_200), "tags": ["final"],
            "venue": ["name": "unknown"],
        ])
        #expect(first.priority == .immediate)
        #expect(first.timestamp == UnixTime(iso8601: "2026-02-08T23:00:00Z"))
        #expect(first.staleDate == UnixTime(iso8601: "2026-02-08T23:02:00Z"))
    }

    @Test("a rule's app names the app of its commands; a malformed one is a load error at its position")
    func ruleApp() throws {
        let withApp = followersRules.replacingOccurrences(of: "    stale_after: duration(\"1m\") * 2", with: "    stale_after: duration(\"1m\") * 2\n    app: scores")
        let rules = try RuleSet.compile(files: [("fans.yaml", withApp)])
        let event: JSONValue = ["type": "goal", "followers": ["ann"], "home": 1, "away": 0, "at": 0]
        guard case .command(let command) = rules.evaluate(record("sports.scores"), event: event, now: now).first else {
            Issue.record("expected a command")
            return
        }
        #expect(command.app == "scores")
        #expect(try ActivityCommand(json: command.json).app == "scores")

        let bad = followersRules.replacingOccurrences(of: "    stale_after: duration(\"1m\") * 2", with: "    stale_after: duration(\"1m\") * 2\n    app: \"two words\"")
        let error = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("fans.yaml", bad)]) }
        let diagnostic = try #require(error.diagnostics.first)
        #expect(diagnostic.message == "app is not an app name")
        #expect(diagnostic.location.line == 29)
    }

    @Test("an empty for_each list matches nothing; a too long one is an error")
    func forEachBounds() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let empty: JSONValue = ["type": "goal", "followers": [], "home": 0, "away": 0, "at": 0]
        #expect(rules.evaluate(record("sports.scores"), event: empty, now: now) == [.noMatch])
        let many = JSONValue.array((0..<1001).map { JSONValue.integer(Int64($0)) })
        let flood: JSONValue = ["type": "goal", "followers": many, "home": 0, "away": 0, "at": 0]
        guard case .failure(let failure) = rules.evaluate(record("sports.scores"), event: flood, now: now).first else {
            Issue.record("expected a failure")
            return
        }
        #expect(failure.reason == "for_each: the list has 1001 elements, more than the limit of 1000")
        #expect(failure.rule == "fan-out")
    }

    @Test("schema violations at run time are failures naming rule, field and types")
    func schemaViolations() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let event: JSONValue = ["type": "goal", "followers": ["a"], "home": 1, "away": 1, "at": 0, "tags": [1]]
        #expect(rules.evaluate(record("sports.scores"), event: event, now: now) == [
            .failure(RuleFailure(code: .ruleError, rule: "fan-out", reason: "for_each element 0: set.tags[0]: expected string, got int 1"))
        ])
    }

    @Test("unreadable events and other topics")
    func unreadable() throws {
        let rules = try RuleSet.load(directory: RulePaths.shippedRules)
        #expect(rules.evaluate(record("nobody.reads"), value: Array("{}".utf8), now: now) == [.noMatch])
        guard case .failure(let notJSON) = rules.evaluate(record("sports.scores"), value: Array("{nope".utf8), now: now).first else {
            Issue.record("expected a failure")
            return
        }
        #expect(notJSON.code == .invalidEvent)
        #expect(notJSON.rule == nil)
        guard case .failure(let array) = rules.evaluate(record("sports.scores"), value: Array("[1]".utf8), now: now).first else {
            Issue.record("expected a failure")
            return
        }
        #expect(array.reason == "the event is a list, expected a JSON object")
        let deep = String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40)
        guard case .failure(let tooDeep) = rules.evaluate(record("sports.scores"), value: Array(deep.utf8), now: now).first else {
            Issue.record("expected a failure")
            return
        }
        #expect(tooDeep.reason.contains("nesting deeper than the limit of 32"))
    }

    @Test("explain names the part of when that was false, with the values")
    func explain() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let event = Array(#"{"type":"kickoff","followers":["a"]}"#.utf8)
        let explanations = try rules.explain(record("sports.scores"), value: event, now: now).get()
        #expect(explanations.map(\.lines) == [[
            "rule fan-out: not matched", "  because `event.type == \"goal\"` was false (`event.type` is \"kickoff\")",
        ]])
        let other = try rules.explain(record("weather"), value: event, now: now).get()
        #expect(other.first?.lines == ["rule fan-out: skipped, reads sports.scores, sports.replays"])
    }

    @Test("explain descends into && and ||")
    func explainCompound() throws {
        let syntax = try ExpressionParser.parse("event.a > 1 && (event.b == \"x\" || !event.c)")
        let text = Array("event.a > 1 && (event.b == \"x\" || !event.c)".unicodeScalars)
        let context = EvaluationContext(event: ["a": 5, "b": "y", "c": true], key: .null, topic: "t", headers: [:], now: 0, recordTime: 0)
        #expect(RuleSet.whyFalse(syntax, scalars: text, context: context) == [
            "`event.b == \"x\"` was false (`event.b` is \"y\")",
            "`!event.c` was false: `event.c` was true",
        ])
    }

    @Test("a store keeps the good set when a reload is bad, and swaps on a good one")
    func storeReload() throws {
        let directory = try RulePaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("fans.yaml")
        try followersRules.write(to: file, atomically: true, encoding: .utf8)
        let store = try RuleSetStore(directory: directory.path)
        #expect(store.current.ruleNames == ["fan-out"])
        #expect(store.generation == 1)

        try (followersRules + "\n  - name: broken\n    topic: t\n").write(to: file, atomically: true, encoding: .utf8)
        guard case .failure(let error) = store.reload(from: directory.path) else {
            Issue.record("a broken set was accepted")
            return
        }
        #expect(error.code == .invalid)
        #expect(error.diagnostics.map(\.message).contains("missing key 'activity_id'"))
        #expect(store.current.ruleNames == ["fan-out"])
        #expect(store.generation == 1)

        try followersRules.replacingOccurrences(of: "name: fan-out", with: "name: fan-out-2").write(to: file, atomically: true, encoding: .utf8)
        guard case .success = store.reload(from: directory.path) else {
            Issue.record("a good set was refused")
            return
        }
        #expect(store.current.ruleNames == ["fan-out-2"])
        #expect(store.generation == 2)
    }

    @Test("an empty or missing directory is an unreadable error")
    func missingDirectory() throws {
        let error = try #require(throws: RuleSetError.self) { try RuleSet.load(directory: "/nonexistent/rules") }
        #expect(error.code == .unreadable)
        let directory = try RulePaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let empty = try #require(throws: RuleSetError.self) { try RuleSet.load(directory: directory.path) }
        #expect(empty.diagnostics.first?.message == "no rule files in the directory")
    }

    @Test("a failing fixture prints a field-by-field diff")
    func fixtureDiff() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let fixture = """
            version: 1
            now: 1770593400
            cases:
              - name: wrong score
                topic: sports.scores
                event: {type: goal, followers: [a], home: 1, away: 0, at: 1770593000}
                expect:
                  commands:
                    - rule: other-rule
                      command: {activity_id: fan-a-0, content_state: {teamOneScore: 2, teamTwoScore: 0, updatedAt: 792286200, tags: null, venue: {name: unknown}}, timestamp: 1770593000, stale_date: 1770593120, priority: 5}
              - name: no match expected
                topic: sports.scores
                event: {type: goal, followers: [], home: 1, away: 0, at: 0}
                expect: no_match
            """
        let results = try RuleFixtures.run(file: "f.yaml", text: fixture, rules: rules).get()
        #expect(results.map(\.passed) == [false, true])
        #expect(results[0].differences == [
            "command 1: expected rule other-rule, got rule fan-out",
            "command 1: content_state.teamOneScore: expected 2, got 1",
        ])
        #expect(results[0].location == SourceLocation(file: "f.yaml", line: 4, column: 5))
    }

    @Test("a broken fixture file is reported with positions")
    func brokenFixture() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let fixture = "version: 1\ncases:\n  - name: x\n    topic: t\n    evnt: {}\n    expect: no_match\n"
        guard case .failure(let error) = RuleFixtures.run(file: "f.yaml", text: fixture, rules: rules) else {
            Issue.record("a broken fixture passed")
            return
        }
        #expect(error.diagnostics.map(\.description).contains("f.yaml:5:5: unknown key 'evnt' in a case (expected 'event')"))
    }

    @Test("the JSON Schema of the rule format lists every rule key")
    func schema() throws {
        let schema = RuleFileSchema.json
        let text = schema.serializedString()
        #expect(try JSONValue.parse(text) == schema)
        let ruleProperties = schema["$defs"]?["rule"]?["properties"]?.objectValue ?? [:]
        #expect(Set(ruleProperties.keys) == Set(RuleLoader.ruleKeys))
    }

    @Test("positions inside folded and plain multi-line scalars")
    func multiLinePositions() throws {
        let text = """
            version: 1
            activity_types:
              T:
                content_state: {a: int}
            rules:
              - name: r
                topic: t
                activity_id: x
                activity_type: T
                when: event.a == 1 &&
                  nope(2)
            """
        let error = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("m.yaml", text)]) }
        #expect(error.diagnostics.first?.location == SourceLocation(file: "m.yaml", line: 11, column: 7))
    }

    @Test("rules guarded by event.F == \"text\" give the same outcomes as running every when")
    func guardedRules() throws {
        let text = """
            version: 1
            activity_types:
              T:
                content_state: {n: int}
            rules:
              - name: a
                topic: t
                when: event.kind == "a" && event.n > 1
                activity_id: "x-{{ event.id }}"
                activity_type: T
                set: {n: event.n}
              - name: b
                topic: t
                when: event.kind == "b"
                activity_id: "x-{{ event.id }}"
                activity_type: T
                set: {n: event.n}
              - name: any
                topic: t
                when: event.n == 7
                activity_id: "y-{{ event.id }}"
                activity_type: T
                set: {n: event.n}
            """
        let rules = try RuleSet.compile(files: [("g.yaml", text)])
        func names(_ event: JSONValue) -> [String] {
            rules.evaluate(record("t"), event: event, now: now).map { outcome in
                switch outcome {
                case .command(let command): command.source?.rule ?? "?"
                case .failure(let failure): "error \(failure.rule ?? "?"): \(failure.reason)"
                case .noMatch: "no match"
                }
            }
        }
        #expect(names(["kind": "a", "n": 2, "id": 1]) == ["a"])
        #expect(names(["kind": "a", "n": 1, "id": 1]) == ["no match"])
        #expect(names(["kind": "b", "n": 7, "id": 1]) == ["b", "any"])
        #expect(names(["kind": 5, "n": 3, "id": 1]) == ["no match"])
        #expect(names(["n": 3, "id": 1]) == ["no match"])
        #expect(names(["kind": "a", "n": "two", "id": 1]) == ["error a: when: '>' cannot compare a string with an int"])
    }

    @Test("positions inside single-quoted scalars with doubled quotes and folded block scalars")
    func quotedAndFoldedPositions() throws {
        let header = """
            version: 1
            activity_types:
              T:
                content_state: {a: string}
            rules:
              - name: r
                topic: t
                activity_id: x
                activity_type: T

            """
        let quoted = header + "    when: 'event.a == ''it'' && nope(1)'\n"
        let quotedError = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("q.yaml", quoted)]) }
        #expect(quotedError.diagnostics.map(\.description) == [
            "q.yaml:10:33: rule r: when: unknown function 'nope' (expected \(BrokenRuleFileTests.functions))"
        ])
        let folded = header + "    when: >\n      event.a == 'x' &&\n      nope(2)\n"
        let foldedError = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("f.yaml", folded)]) }
        #expect(foldedError.diagnostics.first?.location == SourceLocation(file: "f.yaml", line: 12, column: 7))
    }
}

@Suite("rule dates out of range")
struct RuleDateRangeTests {
    static let rules = """
        version: 1
        activity_types:
          Match:
            content_state:
              minute: int
        rules:
          - name: far-stale
            topic: sports.scores
            activity_id: "match-{{ event.id }}"
            activity_type: Match
            set:
              minute: event.minute
            stale_date: now() + duration(event.secs)
            timestamp: date(event.at) + duration(event.shift)
        """

    @Test("a rule that passes check but computes a date beyond year 9999 fails the event, naming the field", arguments: [
        (#"{"id": "1", "minute": 3, "secs": 1e300, "at": 1764000000, "shift": 0}"#, "stale_date"),
        (#"{"id": "1", "minute": 3, "secs": 60, "at": 1764000000, "shift": 1e300}"#, "timestamp"),
        (#"{"id": "1", "minute": 3, "secs": -1e300, "at": 1764000000, "shift": 0}"#, "stale_date"),
    ])
    func farDates(event: String, field: String) throws {
        let rules = try RuleSet.compile(files: [("far.yaml", Self.rules)])
        let outcomes = rules.evaluate(record("sports.scores"), event: try JSONValue.parse(event), now: now)
        guard outcomes.count == 1, case .failure(let failure) = outcomes[0] else {
            Issue.record("expected one failure, got \(outcomes)")
            return
        }
        #expect(failure.reason.contains(field), "\(failure.reason)")
    }

    @Test("minutes_between of dates far apart is an error, not a trap")
    func minutesBetween() throws {
        do {
            let minutes = try Builtins.minutesBetween(.time(0), .time(1e300))
            Issue.record("expected a failure, got \(minutes)")
        } catch {
            #expect(error.message.contains("out of range"))
        }
    }
}
