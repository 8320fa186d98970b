import Foundation
import LiveDispatchCore

/// Reads rule files into compiled rules, collecting every problem with its
/// position instead of stopping at the first.
struct RuleLoader: Sendable {
    var diagnostics: [RuleDiagnostic] = []
    var activityTypes: [String: ActivityTypeDefinition] = [:]
    var rules: [CompiledRule] = []
    private var ruleNames: [String: SourceLocation] = [:]
    private var pendingRules: [(YAMLSource, YAMLNode)] = []

    static let topLevelKeys = ["version", "activity_types", "rules"]
    static let activityTypeKeys = ["content_state", "attributes"]
    static let ruleKeys = [
        "name", "description", "topic", "when", "activity_id", "activity_type", "event", "set", "unset", "replace_state",
        "priority", "alert", "stale_after", "stale_date", "dismiss_after", "dismissal_date", "relevance_score",
        "timestamp", "for_each", "attributes", "audiences", "app", "broadcast", "storage_policy",
    ]
    static let alertKeys = ["title", "body", "sound"]

    /// Adds one file's activity types and keeps its rules for ``compileRules()``.
    mutating func add(file: String, text: String) {
        let source = YAMLSource(file: file, text: text)
        let root: YAMLNode?
        do {
            root = try source.parse()
        } catch {
            diagnostics.append(error)
            return
        }
        guard let root, let pairs = root.pairs else {
            diagnostics.append(RuleDiagnostic(location: source.location(line: 1, column: 1), message: "the file is not a mapping", expected: "version: 1, activity_types and rules"))
            return
        }
        checkKeys(pairs, allowed: Self.topLevelKeys, source: source, rule: nil, context: "the file")
        if let version = root["version"] {
            if version.scalar != "1" {
                diagnostics.append(RuleDiagnostic(location: source.location(version), message: "unsupported version '\(version.scalar ?? version.kindName)'", expected: "version: 1"))
            }
        } else {
            diagnostics.append(RuleDiagnostic(location: source.location(root), message: "missing key 'version'", expected: "version: 1"))
        }
        if let types = root["activity_types"] {
            if let typePairs = types.pairs {
                for (key, value) in typePairs { addActivityType(key: key, value: value, source: source) }
            } else {
                diagnostics.append(RuleDiagnostic(location: source.location(types), message: "activity_types is \(types.kindName)", expected: "a mapping of type names to schemas"))
            }
        }
        if let rulesNode = root["rules"] {
            if let elements = rulesNode.elements {
                for element in elements { pendingRules.append((source, element)) }
            } else {
                diagnostics.append(RuleDiagnostic(location: source.location(rulesNode), message: "rules is \(rulesNode.kindName)", expected: "a list of rules"))
            }
        }
    }

    mutating func checkKeys(_ pairs: [(key: YAMLNode, value: YAMLNode)], allowed: [String], source: YAMLSource, rule: String?, context: String) {
        var seen: Set<String> = []
        for (key, _) in pairs {
            let name = key.scalar ?? ""
            if !allowed.contains(name) {
                let suggestion = allowed.first { $0.lowercased() == name.lowercased() || $0.editDistance(to: name) <= 2 }
                diagnostics.append(RuleDiagnostic(
                    location: source.location(key), rule: rule, message: "unknown key '\(name)' in \(context)",
                    expected: suggestion.map { "'\($0)'" } ?? "one of \(allowed.joined(separator: ", "))"))
            } else if !seen.insert(name).inserted {
                diagnostics.append(RuleDiagnostic(location: source.location(key), rule: rule, message: "key '\(name)' appears twice in \(context)", expected: "each key once"))
            }
        }
    }

    mutating func addActivityType(key: YAMLNode, value: YAMLNode, source: YAMLSource) {
        guard let name = key.scalar, !name.isEmpty else {
            diagnostics.append(RuleDiagnostic(location: source.location(key), message: "an activity type name is not text", expected: "a Swift type name such as SportsActivityAttributes"))
            return
        }
        if let existing = activityTypes[name] {
            diagnostics.append(RuleDiagnostic(location: source.location(key), message: "activity type '\(name)' is already declared at \(existing.location)", expected: "each activity type once"))
            return
        }
        guard let pairs = value.pairs else {
            diagnostics.append(RuleDiagnostic(location: source.location(value), message: "activity type '\(name)' is \(value.kindName)", expected: "a mapping with content_state"))
            return
        }
        checkKeys(pairs, allowed: Self.activityTypeKeys, source: source, rule: nil, context: "activity type '\(name)'")
        var reader = SchemaReader(source: source)
        var contentState: [SchemaField] = []
        if let stateNode = value["content_state"] {
            contentState = reader.fields(stateNode, context: "content_state")
        } else {
            diagnostics.append(RuleDiagnostic(location: source.location(value), message: "missing key 'content_state' in activity type '\(name)'", expected: "a mapping of field names to types"))
        }
        let attributes = value["attributes"].map { reader.fields($0, context: "attributes") }
        diagnostics += reader.diagnostics
        activityTypes[name] = ActivityTypeDefinition(
            type: ActivityType(name: name, contentState: contentState, attributes: attributes), location: source.location(key))
    }

    /// Compiles the rules of every added file against all declared types.
    mutating func compileRules() {
        for (source, node) in pendingRules {
            var builder = RuleBuilder(source: source, node: node, activityTypes: activityTypes)
            if let rule = builder.build() {
                if let first = ruleNames[rule.name], let nameNode = node["name"] {
                    diagnostics.append(RuleDiagnostic(
                        location: source.location(nameNode), rule: rule.name,
                        message: "duplicate rule name, first declared at \(first)", expected: "unique rule names"))
                } else {
                    ruleNames[rule.name] = rule.location
                    if builder.diagnostics.isEmpty { rules.append(rule) }
                }
            }
            diagnostics += builder.diagnostics
        }
        pendingRules = []
    }
}

/// Compiles one rule, collecting its problems.
struct RuleBuilder {
    let source: YAMLSource
    let node: YAMLNode
    let activityTypes: [String: ActivityTypeDefinition]
    var diagnostics: [RuleDiagnostic] = []
    var ruleName: String?
    var compiler = ExpressionCompiler(hasItem: false)
    var forEach: CompiledExpression?

    init(source: YAMLSource, node: YAMLNode, activityTypes: [String: ActivityTypeDefinition]) {
        self.source = source
        self.node = node
        self.activityTypes = activityTypes
    }

    mutating func problem(_ at: YAMLNode, _ message: String, expected: String? = nil) {
        diagnostics.append(RuleDiagnostic(location: source.location(at), rule: ruleName, message: message, expected: expected))
    }

    mutating func problem(in scalar: YAMLNode, offset: Int, _ message: String, expected: String?) {
        diagnostics.append(RuleDiagnostic(location: source.location(of: scalar, offset: offset), rule: ruleName, message: message, expected: expected))
    }

    mutating func scalarText(_ node: YAMLNode, _ key: String) -> String? {
        guard let text = node.scalar else {
            problem(node, "\(key) is \(node.kindName)", expected: "a single value")
            return nil
        }
        return text
    }

    /// Compiles the expression in a scalar; errors point inside it.
    mutating func expression(_ node: YAMLNode, _ key: String) -> CompiledExpression? {
        guard let text = scalarText(node, key) else { return nil }
        do {
            return try compiler.compile(text)
        } catch {
            var expected = error.expected
            if case .compile(let compileError) = error, compileError.message.hasPrefix("unknown name"), node.scalar.map({ !$0.contains("\"") && !$0.contains("'") }) == true {
                expected = (expected ?? "") + "; a string literal needs quotes inside the expression, e.g. '\"text\"'"
            }
            problem(in: node, offset: error.offset, "\(key): \(error.message)", expected: expected)
            return nil
        }
    }

    mutating func template(_ node: YAMLNode, _ key: String) -> Template? {
        guard let text = scalarText(node, key) else { return nil }
        do {
            return try Template.compile(text, compiler: compiler)
        } catch {
            problem(in: node, offset: error.offset, "\(key): \(error.message)", expected: error.expected)
            return nil
        }
    }

    /// An alert's title or body: a template, or a mapping of `loc_key` (a
    /// template) and `loc_args` (a list of at most ``AlertText/maxArguments``
    /// templates).
    mutating func alertText(_ node: YAMLNode, _ key: String) -> AlertTextTemplate? {
        guard let pairs = node.pairs else { return template(node, key).map(AlertTextTemplate.text) }
        checkKeys(pairs, allowed: ["loc_key", "loc_args"], context: key)
        guard let keyNode = node["loc_key"] else {
            problem(node, "missing key 'loc_key' in \(key)", expected: "text, or a mapping with loc_key and optionally loc_args")
            return nil
        }
        let localizationKey = template(keyNode, "\(key).loc_key")
        var arguments: [Template] = []
        if let argumentsNode = node["loc_args"] {
            guard let elements = argumentsNode.elements, elements.count <= AlertText.maxArguments else {
                problem(argumentsNode, "\(key).loc_args is \(argumentsNode.elements.map { "a list of \($0.count)" } ?? argumentsNode.kindName)",
                        expected: "a list of at most \(AlertText.maxArguments) templates")
                return nil
            }
            for (index, element) in elements.enumerated() {
                guard let argument = template(element, "\(key).loc_args[\(index)]") else { return nil }
                arguments.append(argument)
            }
        }
        return localizationKey.map { .localized(key: $0, arguments: arguments) }
    }

    mutating func expect(_ compiled: CompiledExpression, at node: YAMLNode, _ key: String, types: [ValueType], expected: String) {
        if compiled.type != .dyn, !types.contains(compiled.type) {
            problem(in: node, offset: compiled.syntax.span.start, "\(key) is \(compiled.type.article)", expected: expected)
        }
    }

    mutating func build() -> CompiledRule? {
        guard let pairs = node.pairs else {
            problem(node, "a rule is \(node.kindName)", expected: "a mapping with name, topic, activity_id and activity_type")
            return nil
        }
        if let nameNode = node["name"], let name = nameNode.scalar, !name.trimmingSpaces().isEmpty {
            ruleName = name
        }
        checkKeys(pairs, allowed: RuleLoader.ruleKeys, context: "a rule")
        guard let name = ruleName else {
            let at = node["name"] ?? node
            problem(at, node["name"] == nil ? "missing key 'name' in a rule" : "the rule name is empty", expected: "a unique rule name")
            return nil
        }
        for key in ["topic", "activity_id", "activity_type"] where node[key] == nil {
            problem(node, "missing key '\(key)'", expected: key == "topic" ? "the Kafka topic or topics the rule reads" : key == "activity_id" ? "a template such as \"match-{{ event.match_id }}\"" : "one of the activity_types")
        }

        var topics: [String] = []
        if let topicNode = node["topic"] {
            switch topicNode.kind {
            case .scalar(let text, _): topics = [text]
            case .sequence(let elements): topics = elements.compactMap(\.scalar)
            case .mapping: problem(topicNode, "topic is a mapping", expected: "a topic name or a list of topic names")
            }
            if topics.contains(where: { $0.isEmpty }) || (topics.isEmpty && topicNode.pairs == nil) {
                problem(topicNode, "a topic name is empty", expected: "a Kafka topic name")
            }
        }

        // `when` is decided before `for_each` runs, so it cannot see `item`.
        var when: CompiledExpression?
        if let whenNode = node["when"], let compiled = expression(whenNode, "when") {
            expect(compiled, at: whenNode, "when", types: [.bool], expected: "a bool")
            when = compiled
        }

        if let forEachNode = node["for_each"] {
            if let compiled = expression(forEachNode, "for_each") {
                expect(compiled, at: forEachNode, "for_each", types: [.list], expected: "a list")
                forEach = compiled
            }
            compiler.hasItem = true
        }

        let activityID = node["activity_id"].flatMap { template($0, "activity_id") }
        if let idNode = node["activity_id"], let constant = activityID?.constant, (try? ActivityID(constant)) == nil {
            problem(idNode, "activity_id \(constant.debugDescription) is not a valid activity id", expected: "a non-empty id without control characters")
        }

        var event = ActivityEvent.update
        if let eventNode = node["event"], let text = scalarText(eventNode, "event") {
            if let parsed = ActivityEvent(rawValue: text) { event = parsed }
            else { problem(eventNode, "unknown event '\(text)'", expected: "update, end or start") }
        }

        var activityType: ActivityTypeDefinition?
        if let typeNode = node["activity_type"], let typeName = scalarText(typeNode, "activity_type") {
            activityType = activityTypes[typeName]
            if activityType == nil {
                let known = activityTypes.keys.sorted()
                problem(typeNode, "unknown activity type '\(typeName)'", expected: known.isEmpty ? "a type declared under activity_types" : "one of \(known.joined(separator: ", "))")
            }
        }

        var replaceState = false
        if let replaceNode = node["replace_state"] {
            switch replaceNode.json {
            case .bool(let flag): replaceState = flag
            default: problem(replaceNode, "replace_state is '\(replaceNode.scalar ?? replaceNode.kindName)'", expected: "true or false")
            }
        }

        let (broadcast, storagePolicy) = broadcastSettings(node, event: event)

        var set: [FieldAssignment] = []
        if let setNode = node["set"], let type = activityType {
            set = assignments(setNode, schema: type.contentState, path: "set")
        } else if let setNode = node["set"], setNode.pairs == nil {
            problem(setNode, "set is \(setNode.kindName)", expected: "a mapping of content_state fields to expressions")
        }

        var unset: [String] = []
        if let unsetNode = node["unset"] {
            let names: [YAMLNode] = unsetNode.elements ?? [unsetNode]
            for nameNode in names {
                guard let field = nameNode.scalar else {
                    problem(nameNode, "an unset entry is \(nameNode.kindName)", expected: "a content_state field name")
                    continue
                }
                if let type = activityType {
                    if let declared = type.contentState.first(where: { $0.name == field }) {
                        if !declared.optional {
                            problem(nameNode, "cannot unset required field '\(field)'", expected: "an optional field (declared with ?)")
                        }
                    } else {
                        problem(nameNode, "unset names unknown field '\(field)'", expected: "a content_state field of \(type.name)")
                    }
                }
                if set.contains(where: { $0.name == field }) {
                    problem(nameNode, "field '\(field)' is both set and unset", expected: "one of the two")
                }
                unset.append(field)
            }
        }

        if let type = activityType, replaceState || event == .start {
            let covered = Set(set.map(\.name))
            let missing = type.contentState.filter { !$0.optional && !covered.contains($0.name) }.map(\.name)
            if !missing.isEmpty {
                problem(node["set"] ?? node, "\(event == .start ? "a start" : "replace_state") must set every required field; missing \(missing.joined(separator: ", "))", expected: "set to cover the whole content_state of \(type.name)")
            }
        }

        var priority: PrioritySpecification?
        if let priorityNode = node["priority"] {
            if case .integer(let value) = priorityNode.json {
                if value == 5 || value == 10, let checked = try? PushPriority(Int(value)) { // not from a Double: a JSON integer (Int64)
                    priority = .constant(checked)
                } else {
                    problem(priorityNode, "priority \(value) is not allowed", expected: "5 or 10")
                }
            } else if let compiled = expression(priorityNode, "priority") {
                expect(compiled, at: priorityNode, "priority", types: [.int], expected: "an int, 5 or 10")
                priority = .expression(compiled)
            }
        }

        var alert: AlertTemplates?
        if let alertNode = node["alert"] {
            if let alertPairs = alertNode.pairs {
                checkKeys(alertPairs, allowed: RuleLoader.alertKeys, context: "alert")
                let title = alertNode["title"].flatMap { alertText($0, "alert.title") }
                let body = alertNode["body"].flatMap { alertText($0, "alert.body") }
                let sound = alertNode["sound"].flatMap { template($0, "alert.sound") }
                for key in ["title", "body"] where alertNode[key] == nil {
                    problem(alertNode, "missing key '\(key)' in alert", expected: "an alert with title and body")
                }
                if let title, let body { alert = AlertTemplates(title: title, body: body, sound: sound) }
            } else {
                problem(alertNode, "alert is \(alertNode.kindName)", expected: "a mapping with title, body and optionally sound")
            }
        }
        if event == .start && node["alert"] == nil {
            problem(node, "a start needs an alert", expected: "alert with title and body")
        }

        let stale = dateSpecification(after: "stale_after", at: "stale_date")
        let dismissal = dateSpecification(after: "dismiss_after", at: "dismissal_date")

        var relevance: CompiledExpression?
        if let relevanceNode = node["relevance_score"], let compiled = expression(relevanceNode, "relevance_score") {
            expect(compiled, at: relevanceNode, "relevance_score", types: [.int, .double], expected: "a number")
            relevance = compiled
        }
        var timestamp: CompiledExpression?
        if let timestampNode = node["timestamp"], let compiled = expression(timestampNode, "timestamp") {
            expect(compiled, at: timestampNode, "timestamp", types: [.time, .int, .double, .string], expected: "a date")
            timestamp = compiled
        }

        var attributes: [FieldAssignment]?
        if let attributesNode = node["attributes"] {
            if let schema = activityType?.attributes {
                attributes = assignments(attributesNode, schema: schema, path: "attributes")
            } else if let type = activityType {
                problem(attributesNode, "activity type '\(type.name)' declares no attributes", expected: "an attributes schema under activity_types.\(type.name)")
            }
        }
        if event == .start, let type = activityType, let schema = type.attributes {
            let covered = Set((attributes ?? []).map(\.name))
            let missing = schema.filter { !$0.optional && !covered.contains($0.name) }.map(\.name)
            if !missing.isEmpty {
                problem(node["attributes"] ?? node, "a start must give every required attribute; missing \(missing.joined(separator: ", "))", expected: "attributes to cover \(type.name)'s attributes")
            }
        }

        var audiences: [Template] = []
        if let audiencesNode = node["audiences"] {
            if event != .start {
                problem(audiencesNode, "audiences are only for a start", expected: "event: start, or no audiences")
            } else if let elements = audiencesNode.elements, !elements.isEmpty, elements.count <= ActivityCommand.maxAudiences {
                for (index, element) in elements.enumerated() {
                    guard let compiled = template(element, "audiences[\(index)]") else { continue }
                    if let constant = compiled.constant, (try? AudienceKey(constant)) == nil {
                        problem(element, "audiences[\(index)] is not an audience key", expected: "1 to 256 bytes without control characters")
                    }
                    audiences.append(compiled)
                }
            } else {
                problem(audiencesNode, "audiences is \(audiencesNode.kindName)", expected: "a list of 1 to \(ActivityCommand.maxAudiences) audience key templates such as \"followers:{{ event.home_team }}\"")
            }
        }

        var app: String?
        if let appNode = node["app"] {
            if let name = appNode.scalar, AppDirectory.nameProblem(name) == nil {
                app = name
            } else {
                problem(appNode, "app is not an app name", expected: "the name of an app of the worker's apps: (1 to 64 letters, digits, -, _ or .)")
            }
        }

        guard let activityID, let activityType else { return nil }
        return CompiledRule(
            name: name, topics: topics, location: source.location(node), when: when, forEach: forEach, activityID: activityID,
            activityType: activityType.name, event: event, set: set, unset: unset, replaceState: replaceState, priority: priority,
            alert: alert, stale: stale, dismissal: dismissal, relevanceScore: relevance, timestamp: timestamp,
            attributes: attributes ?? (event == .start ? [] : nil), audiences: audiences, app: app, broadcast: broadcast,
            storagePolicy: storagePolicy)
    }

    /// `broadcast` (a start's channel) and `storage_policy`, checked as the
    /// `commands` topic checks them.
    private mutating func broadcastSettings(_ node: YAMLNode, event: ActivityEvent) -> (Bool?, ChannelStoragePolicy?) {
        var broadcast: Bool?
        if let broadcastNode = node["broadcast"] {
            switch broadcastNode.json {
            case .bool(let flag) where event == .start: broadcast = flag
            case .bool: problem(broadcastNode, "broadcast is only for a start", expected: "event: start, or no broadcast")
            default: problem(broadcastNode, "broadcast is '\(broadcastNode.scalar ?? broadcastNode.kindName)'", expected: "true or false")
            }
        }
        var storagePolicy: ChannelStoragePolicy?
        if let policyNode = node["storage_policy"] {
            if broadcast != true {
                problem(policyNode, "storage_policy is only for a start with broadcast: true", expected: "broadcast: true, or no storage_policy")
            } else {
                do {
                    storagePolicy = try ChannelStoragePolicy(parsing: policyNode.scalar ?? "")
                } catch {
                    problem(policyNode, "storage_policy is '\(policyNode.scalar ?? policyNode.kindName)'", expected: "no-storage (0) or most-recent (1)")
                }
            }
        }
        return (broadcast, storagePolicy)
    }

    mutating func checkKeys(_ pairs: [(key: YAMLNode, value: YAMLNode)], allowed: [String], context: String) {
        var loader = RuleLoader()
        loader.checkKeys(pairs, allowed: allowed, source: source, rule: ruleName, context: context)
        diagnostics += loader.diagnostics
    }

    mutating func dateSpecification(after afterKey: String, at atKey: String) -> DateSpecification? {
        if node[afterKey] != nil, let atNode = node[atKey] {
            problem(atNode, "both \(afterKey) and \(atKey) are given", expected: "one of the two")
            return nil
        }
        if let afterNode = node[afterKey] {
            if let text = afterNode.scalar, let seconds = parseDuration(text) {
                return .after(seconds)
            }
            guard let compiled = expression(afterNode, afterKey) else { return nil }
            expect(compiled, at: afterNode, afterKey, types: [.duration, .int, .double], expected: "a duration such as 15m")
            return .afterExpression(compiled)
        }
        if let atNode = node[atKey] {
            guard let compiled = expression(atNode, atKey) else { return nil }
            expect(compiled, at: atNode, atKey, types: [.time, .int, .double, .string], expected: "a date")
            return .at(compiled)
        }
        return nil
    }

    mutating func assignments(_ setNode: YAMLNode, schema: [SchemaField], path: String) -> [FieldAssignment] {
        guard let pairs = setNode.pairs else {
            problem(setNode, "\(path) is \(setNode.kindName)", expected: "a mapping of fields to expressions")
            return []
        }
        var result: [FieldAssignment] = []
        for (key, value) in pairs {
            guard let name = key.scalar else {
                problem(key, "a field name in \(path) is not text", expected: "a field name")
                continue
            }
            guard let field = schema.first(where: { $0.name == name }) else {
                let suggestion = schema.map(\.name).first { $0.editDistance(to: name) <= 2 }
                problem(key, "\(path).\(name) is not a field of the schema", expected: suggestion.map { "'\($0)'" } ?? "one of \(schema.map(\.name).joined(separator: ", "))")
                continue
            }
            if result.contains(where: { $0.name == name }) {
                problem(key, "\(path).\(name) is assigned twice", expected: "each field once")
                continue
            }
            if case .object(let nested) = field.type, value.pairs != nil {
                result.append(FieldAssignment(name: name, kind: .object(assignments(value, schema: nested, path: "\(path).\(name)"))))
                continue
            }
            guard let compiled = expression(value, "\(path).\(name)") else { continue }
            var literal: Value?
            if case .literal(let constant, _) = compiled.syntax { literal = constant }
            if compiled.type == .null {
                if !field.optional {
                    problem(in: value, offset: compiled.syntax.span.start, "\(path).\(name) is required and cannot be null", expected: field.type.name)
                }
            } else if let mismatch = field.type.staticProblem(compiled.type, literal: literal) {
                problem(in: value, offset: compiled.syntax.span.start, "\(path).\(name) \(mismatch.problem)", expected: mismatch.expected)
            }
            result.append(FieldAssignment(name: name, kind: .value(compiled, field)))
        }
        return result
    }
}
