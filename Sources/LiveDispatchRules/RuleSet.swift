import Foundation
import LiveDispatchCore

/// The Kafka record a domain event came in, as the rules see it.
public struct EventRecord: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    /// The record key as UTF-8 text, nil when the record has none.
    public var key: String?
    public var headers: [String: String]
    /// The record's timestamp: the default `timestamp` of every command.
    public var timestamp: UnixTime

    public init(topic: String, partition: Int32 = 0, offset: Int64 = 0, key: String? = nil, headers: [String: String] = [:], timestamp: UnixTime) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.headers = headers
        self.timestamp = timestamp
    }
}

/// Why a rule could not turn an event into a command: the worker
/// dead-letters the record with this reason.
public struct RuleFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: String, Sendable, Hashable {
            case invalidEvent = "invalid-event"
            case ruleError = "rule-error"
        }

        private let kind: Kind

        /// The record value is not a JSON object within the limits.
        public static let invalidEvent = Code(kind: .invalidEvent)
        /// A rule failed on the event: a type error, a missing required field,
        /// a value out of range.
        public static let ruleError = Code(kind: .ruleError)

        public var description: String { kind.rawValue }
    }

    public var code: Code
    /// The rule that failed; nil when the event itself is unreadable.
    public var rule: String?
    /// What went wrong, naming the field and the types.
    public var reason: String

    public init(code: Code, rule: String?, reason: String) {
        self.code = code
        self.rule = rule
        self.reason = reason
    }

    public var description: String { rule.map { "rule \($0): \(reason)" } ?? reason }
}

/// What evaluating the rules on one event gave.
public enum RuleOutcome: Sendable, Hashable {
    /// A command to produce; `source.rule` names the rule.
    case command(ActivityCommand)
    /// A rule failed, or the event was unreadable: dead-letter it.
    case failure(RuleFailure)
    /// No rule reading this topic matched the event.
    case noMatch
}

/// A compiled, checked set of rules. Immutable and `Sendable`: evaluate it
/// from any thread. Build it with ``load(directory:)`` or
/// ``compile(files:)``; a set that exists has no problems.
public struct RuleSet: Sendable {
    let rules: [CompiledRule]
    let rulesByTopic: [String: [CompiledRule]]
    let activityTypes: [String: ActivityTypeDefinition]

    /// Limits on an incoming event of at most `maxBytes` bytes: the worker
    /// passes `limits.max_event_bytes`, so the parser and the configuration
    /// never disagree.
    public static func eventLimits(maxBytes: Int) -> JSONParseLimits {
        JSONParseLimits(maxDepth: 32, maxBytes: maxBytes)
    }

    /// The limits of an event when none are given: `limits.max_event_bytes`'
    /// default, 1 MiB.
    public static let eventLimits = eventLimits(maxBytes: 1 << 20)

    init(rules: [CompiledRule], activityTypes: [String: ActivityTypeDefinition]) {
        self.rules = rules
        self.activityTypes = activityTypes
        types = ActivityTypes(activityTypes.values.map(\.type))
        var byTopic: [String: [CompiledRule]] = [:]
        for rule in rules {
            for topic in rule.topics { byTopic[topic, default: []].append(rule) }
        }
        rulesByTopic = byTopic
    }

    /// The activity types the rule files declare (`activity_types`): the
    /// dispatcher and the HTTP API check every command against them.
    public let types: ActivityTypes

    /// The domain topics the router consumes.
    public var topics: Set<String> { Set(rulesByTopic.keys) }

    /// Rule names in file order.
    public var ruleNames: [String] { rules.map(\.name) }

    /// Compiles rule files given as (file name, text); every problem in
    /// every file is reported at once.
    ///
    /// The work runs on a thread of its own with a large stack: the
    /// compiler walks expression trees recursively (up to
    /// ``ExpressionParser/maxTerms`` levels, with large frames in a debug
    /// build), whatever thread the caller is on.
    public static func compile(files: [(name: String, text: String)]) throws(RuleSetError) -> RuleSet {
        let loader = LargeStack.run {
            var loader = RuleLoader()
            for file in files { loader.add(file: file.name, text: file.text) }
            loader.compileRules()
            return loader
        }
        if !loader.diagnostics.isEmpty {
            throw RuleSetError(code: .invalid, diagnostics: loader.diagnostics.sorted())
        }
        return RuleSet(rules: loader.rules, activityTypes: loader.activityTypes)
    }

    /// Reads and compiles every `*.yaml` and `*.yml` file directly in
    /// `directory` (not its subdirectories, where fixtures live).
    public static func load(directory: String) throws(RuleSetError) -> RuleSet {
        try compile(files: try readFiles(directory: directory))
    }

    /// The rule files of a directory, sorted by name, with their text.
    public static func readFiles(directory: String) throws(RuleSetError) -> [(name: String, text: String)] {
        let manager = FileManager.default
        let names: [String]
        do {
            names = try manager.contentsOfDirectory(atPath: directory)
        } catch {
            throw RuleSetError(code: .unreadable, diagnostics: [RuleDiagnostic(
                location: SourceLocation(file: directory, line: 1, column: 1),
                message: "cannot read the rules directory", expected: "a directory of *.yaml rule files")])
        }
        let ruleFiles = names.filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.sorted()
        if ruleFiles.isEmpty {
            throw RuleSetError(code: .unreadable, diagnostics: [RuleDiagnostic(
                location: SourceLocation(file: directory, line: 1, column: 1),
                message: "no rule files in the directory", expected: "at least one *.yaml rule file")])
        }
        var files: [(name: String, text: String)] = []
        var problems: [RuleDiagnostic] = []
        for name in ruleFiles {
            let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            guard let data = manager.contents(atPath: path) else {
                problems.append(RuleDiagnostic(location: SourceLocation(file: path, line: 1, column: 1), message: "cannot read the file", expected: "a readable file"))
                continue
            }
            guard let text = String(validating: data, as: UTF8.self) else {
                problems.append(RuleDiagnostic(location: SourceLocation(file: path, line: 1, column: 1), message: "the file is not UTF-8", expected: "UTF-8 text"))
                continue
            }
            files.append((path, text))
        }
        if !problems.isEmpty { throw RuleSetError(code: .unreadable, diagnostics: problems) }
        return files
    }

    /// Evaluates every rule that reads the record's topic on its value.
    /// `now` is what `now()` returns: pass the wall clock in production and a
    /// fixed time in tests.
    public func evaluate(
        topic: String, partition: Int32, offset: Int64, key: String?, headers: [String: String], timestamp: UnixTime,
        value: [UInt8], now: UnixTime, eventLimits: JSONParseLimits = RuleSet.eventLimits
    ) -> [RuleOutcome] {
        evaluate(
            EventRecord(topic: topic, partition: partition, offset: offset, key: key, headers: headers, timestamp: timestamp),
            value: value, now: now, eventLimits: eventLimits)
    }

    /// Evaluates the rules on a record whose value is JSON bytes.
    public func evaluate(_ record: EventRecord, value: [UInt8], now: UnixTime, eventLimits: JSONParseLimits = RuleSet.eventLimits) -> [RuleOutcome] {
        guard let rules = rulesByTopic[record.topic] else { return [.noMatch] }
        let event: JSONValue
        do {
            event = try Self.parseEvent(value, limits: eventLimits)
        } catch {
            return [.failure(error)]
        }
        return evaluate(rules, record: record, event: event, now: now)
    }

    /// Evaluates the rules on an event already parsed.
    public func evaluate(_ record: EventRecord, event: JSONValue, now: UnixTime) -> [RuleOutcome] {
        guard let rules = rulesByTopic[record.topic] else { return [.noMatch] }
        guard case .object = event else {
            return [.failure(RuleFailure(code: .invalidEvent, rule: nil, reason: "the event is \(Value(event).type.article), expected a JSON object"))]
        }
        return evaluate(rules, record: record, event: event, now: now)
    }

    static func parseEvent(_ value: [UInt8], limits: JSONParseLimits = RuleSet.eventLimits) throws(RuleFailure) -> JSONValue {
        let event: JSONValue
        do {
            event = try JSONValue.parse(value, limits: limits)
        } catch where error.isInexactNumber {
            let field = error.field.isEmpty ? "the event" : "the event's field \(error.field)"
            throw RuleFailure(code: .invalidEvent, rule: nil, reason: "\(field): \(error.message)")
        } catch {
            throw RuleFailure(code: .invalidEvent, rule: nil, reason: "the event is not JSON: \(error)")
        }
        guard case .object = event else {
            throw RuleFailure(code: .invalidEvent, rule: nil, reason: "the event is \(Value(event).type.article), expected a JSON object")
        }
        return event
    }

    private func evaluate(_ rules: [CompiledRule], record: EventRecord, event: JSONValue, now: UnixTime) -> [RuleOutcome] {
        let context = EvaluationContext(
            event: event, key: record.key.map(Value.string) ?? .null, topic: record.topic, headers: record.headers,
            now: now.seconds, recordTime: record.timestamp.seconds)
        var outcomes: [RuleOutcome] = []
        var guardField: String?
        var guardValue: JSONValue?
        for rule in rules {
            if let condition = rule.guardCondition {
                if guardField != condition.field {
                    guardField = condition.field
                    guardValue = event[condition.field]
                }
                guard case .string(let text)? = guardValue, text == condition.text else { continue }
            }
            switch rule.run(context, record: record) {
            case .notMatched: continue
            case .matched(let commands):
                for command in commands { outcomes.append(.command(command)) }
            case .failed(let failure): outcomes.append(.failure(failure))
            }
        }
        return outcomes.isEmpty ? [.noMatch] : outcomes
    }
}

/// What one rule did with one event.
enum RuleResult: Sendable {
    case notMatched
    case matched([ActivityCommand])
    case failed(RuleFailure)
}

extension CompiledRule {
    func run(_ base: EvaluationContext, record: EventRecord) -> RuleResult {
        do throws(EvaluationFailure) {
            if let when {
                switch try prefixed("when", { () throws(EvaluationFailure) in try when.evaluate(base) }) {
                case .bool(true): break
                case .bool(false): return .notMatched
                case let other: throw EvaluationFailure("when: expected a bool, got \(other.type.article)")
                }
            }
            guard let forEach else { return .matched([try command(base, record: record)]) }
            guard case .list(let elements) = try prefixed("for_each", { () throws(EvaluationFailure) in
                let value = try forEach.evaluate(base)
                if case .null = value { return .list([]) }
                return value
            }) else {
                throw EvaluationFailure("for_each: expected a list, got \((try? forEach.evaluate(base))?.type.article ?? "an error")")
            }
            guard elements.count <= Self.maxForEach else {
                throw EvaluationFailure("for_each: the list has \(elements.count) elements, more than the limit of \(Self.maxForEach)")
            }
            if elements.isEmpty { return .notMatched }
            var commands: [ActivityCommand] = []
            commands.reserveCapacity(elements.count)
            var context = base
            for (position, element) in elements.enumerated() {
                context.item = Value(element)
                context.index = Int64(position)
                do {
                    commands.append(try command(context, record: record))
                } catch {
                    throw EvaluationFailure("for_each element \(position): \(error.message)")
                }
            }
            return .matched(commands)
        } catch {
            return .failed(RuleFailure(code: .ruleError, rule: name, reason: error.message))
        }
    }

    private func prefixed(_ field: String, _ body: () throws(EvaluationFailure) -> Value) throws(EvaluationFailure) -> Value {
        do throws(EvaluationFailure) {
            return try body()
        } catch {
            throw EvaluationFailure("\(field): \(error.message)")
        }
    }

    private func date(_ expression: CompiledExpression, _ context: EvaluationContext, field: String) throws(EvaluationFailure) -> Double {
        let value = try prefixed(field) { () throws(EvaluationFailure) in try expression.evaluate(context) }
        return try Self.seconds(of: value, field: field)
    }

    /// Unix seconds of a date value (a date, ISO-8601 text or Unix seconds).
    private static func seconds(of value: Value, field: String) throws(EvaluationFailure) -> Double {
        if case .time(let seconds) = value { return seconds }
        do throws(EvaluationFailure) {
            guard case .time(let seconds) = try Builtins.toDate(value) else { throw EvaluationFailure("expected a date") }
            return seconds
        } catch {
            throw EvaluationFailure("\(field): \(error.message)")
        }
    }

    private func resolve(_ specification: DateSpecification?, from timestamp: Double, _ context: EvaluationContext, field: String) throws(EvaluationFailure) -> UnixTime? {
        guard let specification else { return nil }
        switch specification {
        case .after(let seconds):
            return UnixTime(seconds: timestamp + seconds)
        case .afterExpression(let expression):
            let value = try prefixed(field) { () throws(EvaluationFailure) in try expression.evaluate(context) }
            switch value {
            case .duration(let seconds): return UnixTime(seconds: timestamp + seconds)
            case .int, .double: return UnixTime(seconds: timestamp + (value.number ?? 0))
            case .null: return nil
            default: throw EvaluationFailure("\(field): expected a duration, got \(value.type.article)")
            }
        case .at(let expression):
            let value = try prefixed(field) { () throws(EvaluationFailure) in try expression.evaluate(context) }
            if case .null = value { return nil }
            let seconds = try Self.seconds(of: value, field: field)
            guard seconds >= 0 else { throw EvaluationFailure("\(field): the date is before 1970") }
            return UnixTime(seconds: seconds)
        }
    }

    func command(_ context: EvaluationContext, record: EventRecord) throws(EvaluationFailure) -> ActivityCommand {
        let idText = try activityID.render(context, field: "activity_id")
        let id: ActivityID
        do {
            id = try ActivityID(idText)
        } catch {
            throw EvaluationFailure("activity_id: \(error.message)")
        }
        var contentState: JSONValue?
        if !set.isEmpty || !unset.isEmpty {
            var fields = try Self.build(set, context, path: "set")
            for field in unset { fields[field] = .null }
            contentState = .object(fields)
        } else if replaceState || event == .start {
            contentState = .object([:])
        }
        let time: Double
        if let timestamp {
            time = try date(timestamp, context, field: "timestamp")
            guard time >= 0 else { throw EvaluationFailure("timestamp: the date is before 1970") }
        } else {
            time = context.recordTime
        }
        var pushPriority: PushPriority?
        switch priority {
        case .none: pushPriority = nil
        case .constant(let value): pushPriority = value
        case .expression(let expression):
            let value = try prefixed("priority") { () throws(EvaluationFailure) in try expression.evaluate(context) }
            switch value {
            case .null: pushPriority = nil
            case .int(5): pushPriority = .normal
            case .int(10): pushPriority = .immediate
            default: throw EvaluationFailure("priority: expected 5 or 10, got \(value.preview)")
            }
        }
        var relevance: Double?
        if let relevanceScore {
            let value = try prefixed("relevance_score") { () throws(EvaluationFailure) in try relevanceScore.evaluate(context) }
            switch value {
            case .null: relevance = nil
            case .int, .double:
                guard let number = value.number, number.isFinite else { throw EvaluationFailure("relevance_score: not a finite number") }
                relevance = number
            default: throw EvaluationFailure("relevance_score: expected a number, got \(value.type.article)")
            }
        }
        var activityAlert: ActivityAlert?
        if let alert {
            activityAlert = ActivityAlert(
                title: try alert.title.render(context, field: "alert.title"),
                body: try alert.body.render(context, field: "alert.body"),
                sound: try alert.sound?.render(context, field: "alert.sound"))
        }
        var attributesJSON: JSONValue?
        if let attributes { attributesJSON = .object(try Self.build(attributes, context, path: "attributes")) }
        var audienceKeys: [AudienceKey] = []
        for (index, audience) in audiences.enumerated() {
            let text = try audience.render(context, field: "audiences[\(index)]")
            do {
                audienceKeys.append(try AudienceKey(text))
            } catch {
                throw EvaluationFailure("audiences[\(index)]: \(error.message)")
            }
        }
        let command = ActivityCommand(
            activityID: id, event: event, contentState: contentState, replaceState: replaceState,
            timestamp: UnixTime(seconds: time), priority: pushPriority,
            staleDate: try resolve(stale, from: time, context, field: "stale_date"),
            dismissalDate: try resolve(dismissal, from: time, context, field: "dismissal_date"),
            relevanceScore: relevance, alert: activityAlert,
            attributesType: event == .start ? activityType : nil, attributes: attributesJSON, audiences: audienceKeys,
            app: app, source: CommandSource(topic: record.topic, partition: record.partition, offset: record.offset, rule: name),
            broadcast: broadcast, storagePolicy: storagePolicy)
        do {
            try command.validate()
        } catch {
            throw EvaluationFailure("the command is invalid: \(error)")
        }
        return command
    }

    static func build(_ assignments: [FieldAssignment], _ context: EvaluationContext, path: String) throws(EvaluationFailure) -> [String: JSONValue] {
        var fields = [String: JSONValue](minimumCapacity: assignments.count + 2)
        for assignment in assignments {
            let name = assignment.name
            switch assignment.kind {
            case .value(let expression, let field):
                // The field's path is written only for an error: not per event.
                let value: Value
                do {
                    value = try expression.evaluate(context)
                } catch {
                    throw EvaluationFailure("\(path).\(name): \(error.message)")
                }
                if case .null = value {
                    guard field.optional else { throw EvaluationFailure("\(path).\(name): is required, got null (give a default with ??)") }
                    fields[name] = .null
                } else {
                    fields[name] = try field.type.conform(value, path: "\(path).\(name)")
                }
            case .object(let nested):
                fields[name] = .object(try build(nested, context, path: "\(path).\(name)"))
            }
        }
        return fields
    }
}
