import Foundation
import LiveDispatchCore

/// One fixture case's verdict.
public struct FixtureResult: Sendable, Hashable {
    public var name: String
    public var location: SourceLocation
    /// Empty when the case passed; otherwise a readable diff, one line each.
    public var differences: [String]

    public var passed: Bool { differences.isEmpty }
}

/// Runs fixture files (`Config/rules/tests/*.yaml`) against a rule set.
///
/// A fixture file:
/// ```yaml
/// version: 1
/// now: "2026-02-08T23:30:00Z"      # what now() returns (each case may override)
/// cases:
///   - name: a goal raises the score
///     topic: sports.scores
///     key: superb-owl-2026          # optional; also headers, partition, offset
///     timestamp: 1770593400         # the record's time (default: now)
///     event: {type: goal, ...}      # or event_json: '{"raw": "text"}'
///     expect:                       # or `expect: no_match`
///       commands:
///         - rule: goal-scored
///           command: {activity_id: match-1, event: update, ...}
///       errors:
///         - rule: goal-scored
///           contains: "teamOneScore"
/// ```
/// Commands are compared whole (without `source`), after reading the
/// expected one as an ``ActivityCommand`` so dates may be written as ISO text.
public struct RuleFixtures: Sendable {
    static let fileKeys = ["version", "now", "cases"]
    static let caseKeys = ["name", "topic", "key", "headers", "partition", "offset", "timestamp", "now", "event", "event_json", "expect"]

    /// Runs one fixture file. A broken fixture file is reported as diagnostics.
    public static func run(file: String, text: String, rules: RuleSet) -> Result<[FixtureResult], RuleSetError> {
        let source = YAMLSource(file: file, text: text)
        var problems: [RuleDiagnostic] = []
        func problem(_ node: YAMLNode, _ message: String, expected: String? = nil) {
            problems.append(RuleDiagnostic(location: source.location(node), message: message, expected: expected))
        }
        let root: YAMLNode
        do {
            guard let parsed = try source.parse(), parsed.pairs != nil else {
                return .failure(RuleSetError(code: .invalid, diagnostics: [RuleDiagnostic(location: source.location(line: 1, column: 1), message: "the fixture file is not a mapping", expected: "version, now and cases")]))
            }
            root = parsed
        } catch {
            return .failure(RuleSetError(code: .invalid, diagnostics: [error]))
        }
        var loader = RuleLoader()
        loader.checkKeys(root.pairs ?? [], allowed: fileKeys, source: source, rule: nil, context: "a fixture file")
        problems += loader.diagnostics
        var defaultNow = UnixTime(seconds: 0)
        if let nowNode = root["now"] {
            if let time = date(nowNode) { defaultNow = time } else { problem(nowNode, "now is not a date", expected: "Unix seconds or ISO-8601") }
        }
        guard let cases = root["cases"]?.elements else {
            problem(root["cases"] ?? root, "missing list 'cases'", expected: "a list of cases")
            return .failure(RuleSetError(code: .invalid, diagnostics: problems))
        }
        var results: [FixtureResult] = []
        for caseNode in cases {
            guard let pairs = caseNode.pairs else {
                problem(caseNode, "a case is \(caseNode.kindName)", expected: "a mapping")
                continue
            }
            var caseLoader = RuleLoader()
            caseLoader.checkKeys(pairs, allowed: caseKeys, source: source, rule: nil, context: "a case")
            problems += caseLoader.diagnostics
            let name = caseNode["name"]?.scalar ?? "case at line \(caseNode.line)"
            guard let topic = caseNode["topic"]?.scalar else {
                problem(caseNode, "case '\(name)' has no topic", expected: "topic: the Kafka topic")
                continue
            }
            var now = defaultNow
            if let nowNode = caseNode["now"] {
                guard let time = date(nowNode) else { problem(nowNode, "now is not a date", expected: "Unix seconds or ISO-8601"); continue }
                now = time
            }
            var timestamp = now
            if let timestampNode = caseNode["timestamp"] {
                guard let time = date(timestampNode) else { problem(timestampNode, "timestamp is not a date", expected: "Unix seconds or ISO-8601"); continue }
                timestamp = time
            }
            var headers: [String: String] = [:]
            if let headerNode = caseNode["headers"] {
                for (key, value) in headerNode.pairs ?? [] {
                    if let name = key.scalar, let text = value.scalar { headers[name] = text }
                }
            }
            let record = EventRecord(
                topic: topic, partition: Int32(caseNode["partition"]?.json.integerValue ?? 0),
                offset: caseNode["offset"]?.json.integerValue ?? 0, key: caseNode["key"]?.scalar, headers: headers,
                timestamp: timestamp)
            let value: [UInt8]
            if let raw = caseNode["event_json"]?.scalar {
                value = Array(raw.utf8)
            } else if let eventNode = caseNode["event"] {
                value = eventNode.json.serialized()
            } else {
                problem(caseNode, "case '\(name)' has no event", expected: "event or event_json")
                continue
            }
            guard let expectNode = caseNode["expect"] else {
                problem(caseNode, "case '\(name)' has no expect", expected: "no_match, or commands and errors")
                continue
            }
            let outcomes = rules.evaluate(record, value: value, now: now)
            switch compare(outcomes, expectNode, source: source) {
            case .success(let differences):
                results.append(FixtureResult(name: name, location: source.location(caseNode), differences: differences))
            case .failure(let diagnostic):
                problems.append(diagnostic)
            }
        }
        if !problems.isEmpty { return .failure(RuleSetError(code: .invalid, diagnostics: problems.sorted())) }
        return .success(results)
    }

    static func date(_ node: YAMLNode) -> UnixTime? {
        switch node.json {
        case .integer(let value): return UnixTime(seconds: Double(value))
        case .double(let value): return UnixTime(seconds: value)
        case .string(let text): return UnixTime(iso8601: text)
        default: return nil
        }
    }

    static func compare(_ outcomes: [RuleOutcome], _ expect: YAMLNode, source: YAMLSource) -> Result<[String], RuleDiagnostic> {
        var commands: [ActivityCommand] = []
        var failures: [RuleFailure] = []
        for outcome in outcomes {
            switch outcome {
            case .command(let command): commands.append(command)
            case .failure(let failure): failures.append(failure)
            case .noMatch: break
            }
        }
        func describeActual() -> [String] {
            commands.map { "got command from rule \($0.source?.rule ?? "?"): \(strip($0.json).serializedString())" }
                + failures.map { "got error: \($0)" }
        }
        if expect.scalar == "no_match" {
            return .success(commands.isEmpty && failures.isEmpty ? [] : ["expected no match"] + describeActual())
        }
        guard expect.pairs != nil else {
            return .failure(RuleDiagnostic(location: source.location(expect), message: "expect is '\(expect.scalar ?? expect.kindName)'", expected: "no_match, or a mapping with commands and errors"))
        }
        var differences: [String] = []
        let expectedCommands = expect["commands"]?.elements ?? []
        let expectedErrors = expect["errors"]?.elements ?? []
        if expectedCommands.count != commands.count {
            differences.append("expected \(expectedCommands.count) command\(expectedCommands.count == 1 ? "" : "s"), got \(commands.count)")
        }
        for (position, node) in expectedCommands.enumerated() {
            let wantedRule = node["rule"]?.scalar
            guard let commandNode = node["command"] else {
                return .failure(RuleDiagnostic(location: source.location(node), message: "an expected command has no 'command'", expected: "rule and command"))
            }
            let wanted: JSONValue
            do {
                wanted = strip(try ActivityCommand(json: commandNode.json).json)
            } catch {
                return .failure(RuleDiagnostic(location: source.location(commandNode), message: "the expected command is invalid: \(error)", expected: "an activity command"))
            }
            guard position < commands.count else {
                differences.append("command \(position + 1): missing, expected \(wanted.serializedString())")
                continue
            }
            let actual = commands[position]
            if let wantedRule, wantedRule != actual.source?.rule {
                differences.append("command \(position + 1): expected rule \(wantedRule), got rule \(actual.source?.rule ?? "none")")
            }
            differences += diff(wanted, strip(actual.json), path: "").map { "command \(position + 1): \($0)" }
        }
        if commands.count > expectedCommands.count {
            differences += commands[expectedCommands.count...].map { "unexpected command from rule \($0.source?.rule ?? "?"): \(strip($0.json).serializedString())" }
        }
        if expectedErrors.count != failures.count {
            differences.append("expected \(expectedErrors.count) error\(expectedErrors.count == 1 ? "" : "s"), got \(failures.count)")
            differences += failures.map { "got error: \($0)" }
        }
        for (position, node) in expectedErrors.enumerated() where position < failures.count {
            let failure = failures[position]
            if let rule = node["rule"]?.scalar, rule != failure.rule {
                differences.append("error \(position + 1): expected rule \(rule), got \(failure.rule ?? "no rule")")
            }
            if let part = node["contains"]?.scalar, !failure.reason.contains(part) {
                differences.append("error \(position + 1): expected a reason containing \(part.debugDescription), got \(failure.reason.debugDescription)")
            }
        }
        return .success(differences)
    }

    static func strip(_ command: JSONValue) -> JSONValue {
        guard case .object(var fields) = command else { return command }
        fields["source"] = nil
        return .object(fields)
    }

    /// Field-by-field differences: `path: expected X, got Y`.
    static func diff(_ expected: JSONValue, _ actual: JSONValue, path: String) -> [String] {
        if case .object(let wanted) = expected, case .object(let got) = actual {
            var lines: [String] = []
            for key in Set(wanted.keys).union(got.keys).sorted() {
                let child = path.isEmpty ? key : "\(path).\(key)"
                switch (wanted[key], got[key]) {
                case (let a?, let b?): lines += diff(a, b, path: child)
                case (let a?, nil): lines.append("\(child): expected \(a.serializedString()), got nothing")
                case (nil, let b?): lines.append("\(child): expected nothing, got \(b.serializedString())")
                case (nil, nil): break
                }
            }
            return lines
        }
        if expected == actual { return [] }
        if let a = expected.numberValue, let b = actual.numberValue, a == b { return [] }
        return ["\(path.isEmpty ? "value" : path): expected \(expected.serializedString()), got \(actual.serializedString())"]
    }
}
