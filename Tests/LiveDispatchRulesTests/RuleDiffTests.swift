import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

/// The shipped rules with one replacement in `sports.yaml`.
func shippedRules(replacing target: String? = nil, with replacement: String = "") throws -> RuleSet {
    var files = try RuleSet.readFiles(directory: RulePaths.shippedRules)
    if let target {
        let index = try #require(files.firstIndex { $0.name.hasSuffix("sports.yaml") })
        #expect(files[index].text.contains(target), "sports.yaml no longer has \(target)")
        files[index].text = files[index].text.replacingOccurrences(of: target, with: replacement)
    }
    return try RuleSet.compile(files: files)
}

/// A match as the demo plays it, plus an order and a record that is not JSON.
let matchEvents: [(topic: String, json: String)] = [
    ("sports.scores", #"{"type": "kickoff", "match_id": "m1", "home_team": "Owls", "away_team": "Hawks"}"#),
    ("delivery.orders", #"{"order_id": "A-1", "status": "confirmed", "eta": "2026-02-09T00:00:00Z", "restaurant": "Owl Pizza"}"#),
    ("sports.scores", #"{"type": "goal", "match_id": "m1", "minute": 12, "scoring_team": "Owls", "scorer": "Ada", "score": {"home": 1, "away": 0}}"#),
    ("sports.scores", #"{"type": "period", "match_id": "m1", "period": "half_time", "minute": 45}"#),
    ("sports.scores", "not json"),
    ("sports.scores", #"{"type": "goal", "match_id": "m1", "minute": 78, "scoring_team": "Hawks", "scorer": "Grace", "score": {"home": 1, "away": 1}}"#),
    ("sports.scores", #"{"type": "goal", "match_id": "m2", "minute": 5, "scoring_team": "Cats", "scorer": "Tom", "score": {"home": 0, "away": 1}}"#),
]

/// Runs `events` through a diff of `base` and `new`, at offsets 0, 1, …
func diff(_ base: RuleSet, _ new: RuleSet, events: [(topic: String, json: String)] = matchEvents, limits: RuleDiff.Limits = .init()) -> RuleDiff {
    var diff = RuleDiff(limits: limits)
    for (offset, event) in events.enumerated() {
        let record = EventRecord(topic: event.topic, partition: 0, offset: Int64(offset), key: nil, timestamp: now)
        let outcomes = RuleDiff.evaluate(base: base, new: new, record: record, value: Array(event.json.utf8), now: now)
        diff.add(record, base: outcomes.base, new: outcomes.new, now: now)
    }
    return diff
}

@Suite("Rule diffs")
struct RuleDiffTests {
    @Test("the same rules differ on nothing; an unreadable event is counted, not an error")
    func identical() throws {
        let rules = try shippedRules()
        let report = diff(rules, rules).report(limit: 10)
        #expect(report.summary == RuleDiff.Summary(eventsRead: 7, unreadableEvents: 1))
        #expect(report.activities.isEmpty)
        #expect(report.newErrors.isEmpty)
        #expect(report.unreadable.examples.map(\.position) == [EventPosition(topic: "sports.scores", partition: 0, offset: 4)])
    }

    @Test("a changed alert title shows only the goals' activities, field by field, with the Lock Screen states")
    func alertChange() throws {
        let base = try shippedRules()
        let new = try shippedRules(replacing: #"title: "Goal for {{ event.scoring_team }}!""#, with: #"title: "GOAL! {{ event.scoring_team }}""#)
        let report = diff(base, new).report(limit: 10)
        #expect(report.summary.eventsDiffering == 3)
        #expect(report.summary.activitiesAffected == 2)
        #expect(report.summary.commandsChanged == 3)
        #expect(report.summary.commandsAdded == 0 && report.summary.commandsRemoved == 0 && report.summary.newErrors == 0)
        #expect(report.activities.map(\.activityID.rawValue) == ["match-m1", "match-m2"])
        let first = try #require(report.activities.first?.examples.first)
        #expect(first.kind == .changed)
        #expect(first.position.offset == 2)
        #expect(first.baseRule == "goal-scored" && first.newRule == "goal-scored")
        #expect(first.fields == [FieldChange(path: "alert.title", before: .string("Goal for Owls!"), after: .string("GOAL! Owls"))])
        // The state the kickoff left, with the goal folded in, on both sides.
        #expect(first.stateBefore == first.stateAfter)
        #expect(first.stateBefore.attributes?["teamOneName"] == .string("Owls"))
        #expect(first.stateBefore.contentState["teamOneScore"] == .integer(1))
        #expect(first.stateBefore.contentState["lastScorer"] == .string("Ada"))
    }

    @Test("a rule that now fails on some events is a new error naming the rule and the events")
    func newErrors() throws {
        let base = try shippedRules()
        let new = try shippedRules(replacing: "teamOneScore: event.score.home\n      teamTwoScore: event.score.away\n      minute:", with: "teamOneScore: 'event.minute < 60 ? event.score.home : event.score.extra'\n      teamTwoScore: event.score.away\n      minute:")
        let report = diff(base, new).report(limit: 10)
        #expect(report.summary.newErrors == 1)
        #expect(report.summary.commandsRemoved == 1)
        #expect(report.newErrors.map(\.rule) == ["goal-scored"])
        #expect(report.newErrors.first?.examples.map(\.position.offset) == [5])
        #expect(report.newErrors.first?.examples.first?.reason.contains("teamOneScore") == true)
        let removed = try #require(report.activities.first?.examples.first)
        #expect(removed.kind == .removed)
        #expect(removed.newRule == nil)
        // Without the goal the Lock Screen keeps the score it had.
        #expect(removed.stateBefore.contentState["teamTwoScore"] == .integer(1))
        #expect(removed.stateAfter.contentState["teamTwoScore"] == .integer(0))
        #expect(removed.fields.contains(FieldChange(path: "content_state.teamTwoScore", before: .integer(1), after: .integer(0))))
        // The fix is the other way round.
        let fixed = diff(new, base).report(limit: 10)
        #expect(fixed.summary.newErrors == 0 && fixed.summary.fixedErrors == 1 && fixed.summary.commandsAdded == 1)
    }

    @Test("a rule that reads a new topic adds commands; the rule made it is a field")
    func addedCommands() throws {
        let base = try shippedRules()
        let new = try shippedRules(replacing: "topic: sports.scores\n    when: event.type == \"kickoff\"", with: "topic: [sports.scores, sports.kickoffs]\n    when: event.type == \"kickoff\"")
        let events: [(topic: String, json: String)] = [("sports.kickoffs", #"{"type": "kickoff", "match_id": "m9", "home_team": "A", "away_team": "B"}"#)]
        let report = diff(base, new, events: events).report(limit: 10)
        #expect(report.summary.commandsAdded == 1)
        let added = try #require(report.activities.first?.examples.first)
        #expect(added.kind == .added && added.baseRule == nil && added.newRule == "kickoff")
        #expect(added.fields.contains(FieldChange(path: "rule", before: nil, after: .string("kickoff"))))
        #expect(added.fields.contains(FieldChange(path: "content_state.teamOneScore", before: nil, after: .integer(0))))
    }

    @Test("memory stays bounded: examples, the activity table and the distinct count have limits")
    func bounded() throws {
        let base = try shippedRules()
        let new = try shippedRules(replacing: #"title: "Goal for {{ event.scoring_team }}!""#, with: #"title: "Goal!""#)
        var events: [(topic: String, json: String)] = []
        for match in 0..<50 {
            // Match 0 has 20 goals, every other one goal.
            for minute in 0..<(match == 0 ? 20 : 1) {
                events.append(("sports.scores", #"{"type": "goal", "match_id": "m\#(match)", "minute": \#(minute), "scoring_team": "X", "score": {"home": 1, "away": 0}}"#))
            }
        }
        var limits = RuleDiff.Limits()
        limits.activities = 8
        limits.examplesPerActivity = 2
        limits.distinctActivities = 10
        limits.trackedStates = 5
        let result = diff(base, new, events: events, limits: limits)
        let report = result.report(limit: 3)
        #expect(report.summary.eventsDiffering == 69)
        #expect(report.summary.activitiesAffected == 10)
        #expect(!report.summary.activitiesAffectedIsExact)
        #expect(report.activities.count == 3)
        #expect(report.activities.first?.activityID.rawValue == "match-m0")
        #expect(report.activities.first?.events == 20)
        #expect(report.activities.first?.examples.count == 2)
        #expect(result.report(limit: 100).activities.count <= 8)
    }

    @Test("field changes flatten objects and compare arrays whole")
    func fieldChanges() {
        let before: JSONValue = .object(["a": .integer(1), "b": .object(["c": .string("x"), "d": .array([.integer(1)])]), "e": .object([:])])
        let after: JSONValue = .object(["a": .integer(1), "b": .object(["c": .string("y"), "d": .array([.integer(2)])]), "f": .bool(true)])
        #expect(FieldChange.between(before, after) == [
            FieldChange(path: "b.c", before: .string("x"), after: .string("y")),
            FieldChange(path: "b.d", before: .array([.integer(1)]), after: .array([.integer(2)])),
            FieldChange(path: "e", before: .object([:]), after: nil),
            FieldChange(path: "f", before: nil, after: .bool(true)),
        ])
        #expect(FieldChange.between(.integer(1), .string("1")) == [FieldChange(path: "(value)", before: .integer(1), after: .string("1"))])
    }

    @Test("an event too large for either rule set fails alike with the rejection given")
    func rejection() throws {
        let rules = try shippedRules()
        let record = EventRecord(topic: "sports.scores", timestamp: now)
        let failure = RuleFailure(code: .invalidEvent, rule: nil, reason: "too large")
        let outcomes = RuleDiff.evaluate(base: rules, new: rules, record: record, value: [], now: now, rejection: failure)
        #expect(outcomes.base == [.failure(failure)] && outcomes.new == [.failure(failure)])
        let other = RuleDiff.evaluate(base: rules, new: rules, record: EventRecord(topic: "elsewhere", timestamp: now), value: [], now: now)
        #expect(other.base == [.noMatch] && other.new == [.noMatch])
    }
}
