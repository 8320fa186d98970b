import LiveDispatchCore

/// What rules add to a schema type: checking the values they compute.
extension SchemaType {
    /// Checks a run-time value against the type and gives the JSON that goes
    /// into the command. Dates become seconds since 2001-01-01, which is how
    /// the app's `ContentState` decodes a `Date` with default strategies.
    func conform(_ value: Value, path: @autoclosure () -> String) throws(EvaluationFailure) -> JSONValue {
        func mismatch() -> EvaluationFailure {
            EvaluationFailure("\(path()): expected \(name), got \(value.type.name) \(value.preview)")
        }
        switch self {
        case .int:
            switch value {
            case .int(let number): return .integer(number)
            case .double(let number):
                guard let whole = Int64(exactly: number) else { throw mismatch() }
                return .integer(whole)
            default: throw mismatch()
            }
        case .double:
            guard let number = value.number else { throw mismatch() }
            return .double(number)
        case .string:
            guard case .string(let text) = value else { throw mismatch() }
            return .string(text)
        case .bool:
            guard case .bool(let flag) = value else { throw mismatch() }
            return .bool(flag)
        case .date:
            switch value {
            case .time(let seconds): return .double(seconds - Self.referenceDateOffset)
            case .int, .double, .string:
                guard case .time(let seconds) = try Builtins.toDate(value) else { throw mismatch() }
                return .double(seconds - Self.referenceDateOffset)
            default: throw mismatch()
            }
        case .enumeration(let members):
            guard case .string(let text) = value else { throw mismatch() }
            guard members.contains(text) else {
                throw EvaluationFailure("\(path()): \(text.debugDescription) is not one of \(members.joined(separator: ", "))")
            }
            return .string(text)
        case .object(let fields):
            guard case .map(let members) = value else { throw mismatch() }
            var result: [String: JSONValue] = [:]
            for field in fields {
                let member = members[field.name].map(Value.init) ?? .null
                if case .null = member {
                    if !field.optional { throw EvaluationFailure("\(path()).\(field.name): is required, got null") }
                    continue
                }
                result[field.name] = try field.type.conform(member, path: "\(path()).\(field.name)")
            }
            if let unknown = members.keys.sorted().first(where: { name in !fields.contains { $0.name == name } }) {
                throw EvaluationFailure("\(path()).\(unknown): is not a field of the schema")
            }
            return .object(result)
        case .array(let element):
            guard case .list(let elements) = value else { throw mismatch() }
            var result: [JSONValue] = []
            result.reserveCapacity(elements.count)
            for (position, item) in elements.enumerated() {
                if case .null = item { throw EvaluationFailure("\(path())[\(position)]: expected \(element.name), got null") }
                result.append(try element.conform(Value(item), path: "\(path())[\(position)]"))
            }
            return .array(result)
        }
    }

    /// What is wrong with giving this field a value of a known static type,
    /// and what was expected; nil when it can fit. `literal` is the value
    /// when it is constant.
    func staticProblem(_ type: ValueType, literal: Value?) -> (problem: String, expected: String)? {
        switch (self, type) {
        case (_, .dyn): return nil
        case (.int, .int), (.double, .int), (.double, .double), (.string, .string), (.bool, .bool),
            (.date, .time), (.date, .string), (.date, .int), (.date, .double), (.array, .list), (.object, .map):
            return nil
        case (.enumeration(let members), .string):
            if case .string(let text)? = literal, !members.contains(text) {
                return ("\(text.debugDescription) is not a member of the enum", "one of \(members.joined(separator: ", "))")
            }
            return nil
        case (.int, .double):
            return ("is a double", "int; convert with round() or int()")
        default:
            return ("is \(type.article)", name)
        }
    }
}

/// Reads schemas from YAML: `int`, `double`, `string`, `bool`, `date`,
/// `enum(a, b)`, a mapping for an object, `[type]` for an array, and `?`
/// after a type or a field name for an optional field.
struct SchemaReader {
    let source: YAMLSource
    var diagnostics: [RuleDiagnostic] = []

    static let expectedType = "int, double, string, bool, date, enum(a, b), a mapping for an object or [type] for a list, with ? for optional"

    mutating func fields(_ node: YAMLNode, context: String) -> [SchemaField] {
        guard let pairs = node.pairs else {
            diagnostics.append(RuleDiagnostic(location: source.location(node), message: "\(context) is \(node.kindName)", expected: "a mapping of field names to types"))
            return []
        }
        var fields: [SchemaField] = []
        for (key, value) in pairs {
            guard var name = key.scalar, !name.isEmpty else {
                diagnostics.append(RuleDiagnostic(location: source.location(key), message: "a field name in \(context) is not text", expected: "a field name"))
                continue
            }
            var optional = false
            if name.hasSuffix("?") {
                optional = true
                name.removeLast()
            }
            if fields.contains(where: { $0.name == name }) {
                diagnostics.append(RuleDiagnostic(location: source.location(key), message: "field '\(name)' is declared twice in \(context)", expected: "each field once"))
                continue
            }
            guard let (type, typeOptional) = self.type(value, context: "\(context).\(name)") else { continue }
            fields.append(SchemaField(name: name, type: type, optional: optional || typeOptional))
        }
        return fields
    }

    mutating func type(_ node: YAMLNode, context: String) -> (SchemaType, Bool)? {
        switch node.kind {
        case .mapping:
            return (.object(fields(node, context: context)), false)
        case .sequence(let elements):
            guard elements.count == 1, let (element, _) = type(elements[0], context: "\(context)[]") else {
                if elements.count != 1 {
                    diagnostics.append(RuleDiagnostic(location: source.location(node), message: "the list type of \(context) has \(elements.count) element types", expected: "exactly one, e.g. [int]"))
                }
                return nil
            }
            return (.array(element), false)
        case .scalar(let raw, _):
            var text = raw.trimmingSpaces()
            var optional = false
            if text.hasSuffix("?") {
                optional = true
                text.removeLast()
            }
            switch text {
            case "int": return (.int, optional)
            case "double": return (.double, optional)
            case "string": return (.string, optional)
            case "bool": return (.bool, optional)
            case "date": return (.date, optional)
            default: break
            }
            if text.hasPrefix("enum("), text.hasSuffix(")") {
                let members = text.dropFirst(5).dropLast().split(separator: ",").map { String($0).trimmingSpaces() }
                if members.isEmpty || members.contains(where: \.isEmpty) {
                    diagnostics.append(RuleDiagnostic(location: source.location(node), message: "enum of \(context) has an empty member", expected: "enum(first, second, ...)"))
                    return nil
                }
                return (.enumeration(members), optional)
            }
            if text.hasPrefix("["), text.hasSuffix("]") {
                let inner = YAMLNode(kind: .scalar(String(text.dropFirst().dropLast()), .plain), line: node.line, column: node.column + 1)
                guard let (element, _) = type(inner, context: "\(context)[]") else { return nil }
                return (.array(element), optional)
            }
            diagnostics.append(RuleDiagnostic(location: source.location(node), message: "unknown type '\(text)' for \(context)", expected: Self.expectedType))
            return nil
        }
    }
}
