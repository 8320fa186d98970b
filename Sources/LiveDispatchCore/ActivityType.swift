/// The type of a `content_state` (or `attributes`) field, as an activity
/// type declares it: what the app's Swift `Codable` type decodes.
public indirect enum SchemaType: Sendable, Hashable {
    case int, double, string, bool, date
    case enumeration([String])
    case object([SchemaField])
    case array(SchemaType)

    public var name: String {
        switch self {
        case .int: "int"
        case .double: "double"
        case .string: "string"
        case .bool: "bool"
        case .date: "date"
        case .enumeration(let members): "enum(\(members.joined(separator: ", ")))"
        case .object: "object"
        case .array(let element): "[\(element.name)]"
        }
    }

    /// Offset between Unix time and the reference date (2001-01-01) that
    /// ActivityKit's default `JSONDecoder` uses for `Date` fields.
    public static let referenceDateOffset = 978_307_200.0

    /// The first place where `json` is not what the app's decoder reads
    /// as this type, or nil when it decodes. `path` is the dotted path of
    /// `json` (`content_state.score`). A date is a number (seconds since
    /// 2001-01-01, the default `Date` strategy); an object has every
    /// required field, no null one and none it does not declare (a
    /// misspelled field would be dropped by the decoder, and the field it
    /// meant would be missing or keep its old value).
    public func mismatch(in json: JSONValue, path: String) -> FieldError? {
        func expected(_ what: String) -> FieldError {
            let text = json.serializedString()
            let preview = text.count > 60 ? String(text.prefix(57)) + "..." : text
            return FieldError(field: path, message: "expected \(what), got \(json.typeName) \(preview)")
        }
        switch self {
        case .int:
            switch json {
            case .integer: return nil
            case .double(let number): return Int64(exactly: number) == nil ? expected("an int") : nil
            default: return expected("an int")
            }
        case .double:
            return json.numberValue != nil ? nil : expected("a double")
        case .date:
            return json.numberValue != nil ? nil : expected("a date (seconds since 2001-01-01)")
        case .string:
            if case .string = json { return nil }
            return expected("a string")
        case .bool:
            if case .bool = json { return nil }
            return expected("a bool")
        case .enumeration(let members):
            guard case .string(let text) = json else { return expected("one of \(members.joined(separator: ", "))") }
            guard members.contains(text) else {
                return FieldError(field: path, message: "\(text.debugDescription) is not one of \(members.joined(separator: ", "))")
            }
            return nil
        case .object(let fields):
            guard case .object(let members) = json else { return expected("an object") }
            return SchemaField.mismatch(in: members, fields: fields, path: path)
        case .array(let element):
            guard case .array(let items) = json else { return expected("a list of \(element.name)") }
            for (position, item) in items.enumerated() {
                if let problem = element.mismatch(in: item, path: "\(path)[\(position)]") { return problem }
            }
            return nil
        }
    }
}

/// One field of a schema.
public struct SchemaField: Sendable, Hashable {
    public var name: String
    public var type: SchemaType
    public var optional: Bool

    public init(name: String, type: SchemaType, optional: Bool = false) {
        self.name = name
        self.type = type
        self.optional = optional
    }

    /// The first field of `members` that does not fit `fields`: a required
    /// one missing or null, one of the wrong type, or one not declared.
    /// Fields are looked at in declaration order, then the undeclared ones
    /// by name, so the same object always names the same field.
    static func mismatch(in members: [String: JSONValue], fields: [SchemaField], path: String) -> FieldError? {
        let prefix = path.isEmpty ? "" : path + "."
        for field in fields {
            guard let value = members[field.name], value != .null else {
                if field.optional { continue }
                return FieldError(field: prefix + field.name, message: "is required (\(field.type.name)) and missing")
            }
            if let problem = field.type.mismatch(in: value, path: prefix + field.name) { return problem }
        }
        if let unknown = members.keys.sorted().first(where: { name in !fields.contains { $0.name == name } }) {
            return undeclared(unknown, fields: fields, prefix: prefix)
        }
        return nil
    }

    /// A field the type does not declare, with the declared one it may be a misspelling of.
    private static func undeclared(_ name: String, fields: [SchemaField], prefix: String) -> FieldError {
        let suggestion = fields.map(\.name).first { $0.lowercased() == name.lowercased() || $0.editDistance(to: name) <= 2 }
        return FieldError(
            field: prefix + name, message: "is not a field of the type" + (suggestion.map { " (did you mean '\($0)'?)" } ?? ""))
    }

    /// The first member of a merge patch on an object of `fields` that
    /// cannot be part of one: an undeclared field, a required one removed
    /// (null), or a value of the wrong type; an object member is itself a
    /// patch. Fields the patch does not name are not looked at: for when
    /// the state it applies to is not known here.
    static func patchMismatch(in members: [String: JSONValue], fields: [SchemaField], path: String) -> FieldError? {
        let prefix = path.isEmpty ? "" : path + "."
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            guard let field = fields.first(where: { $0.name == name }) else { return undeclared(name, fields: fields, prefix: prefix) }
            switch (value, field.type) {
            case (.null, _):
                if !field.optional { return FieldError(field: prefix + name, message: "is required (\(field.type.name)) and cannot be removed") }
            case (.object(let nested), .object(let nestedFields)):
                if let problem = patchMismatch(in: nested, fields: nestedFields, path: prefix + name) { return problem }
            default:
                if let problem = field.type.mismatch(in: value, path: prefix + name) { return problem }
            }
        }
        return nil
    }
}

/// An activity type: the app's `ActivityAttributes` type, by its Swift
/// name, with the fields of its `ContentState` and of its attributes.
public struct ActivityType: Sendable, Hashable {
    public var name: String
    public var contentState: [SchemaField]
    /// Nil when the type does not declare its attributes: they are not checked.
    public var attributes: [SchemaField]?

    public init(name: String, contentState: [SchemaField], attributes: [SchemaField]? = nil) {
        self.name = name
        self.contentState = contentState
        self.attributes = attributes
    }

    /// The first place where a full content-state does not fit.
    public func contentStateMismatch(_ state: JSONValue) -> FieldError? {
        SchemaType.object(contentState).mismatch(in: state, path: "content_state")
    }

    /// The first place where attributes do not fit; nil when they fit or
    /// the type declares none.
    public func attributesMismatch(_ attributes: JSONValue) -> FieldError? {
        guard let fields = self.attributes else { return nil }
        return SchemaType.object(fields).mismatch(in: attributes, path: "attributes")
    }
}

/// The activity types the deployment declares, by name.
public struct ActivityTypes: Sendable, Hashable {
    public private(set) var byName: [String: ActivityType]

    public static let none = ActivityTypes([])

    public init(_ types: [ActivityType]) {
        var byName: [String: ActivityType] = [:]
        for type in types { byName[type.name] = type }
        self.byName = byName
    }

    public subscript(name: String) -> ActivityType? { byName[name] }

    public var isEmpty: Bool { byName.isEmpty }

    public var names: [String] { byName.keys.sorted() }

    /// Why a command cannot apply to an activity of type `known` (nil: the
    /// activity has none yet) once its content-state is folded into
    /// `merged`, or nil when it fits, or when its type is not declared
    /// (``checking(_:known:)`` tells those apart).
    public func refusal(of command: ActivityCommand, known: String?, merged: JSONValue) -> TypeRefusal? {
        if let known, let named = command.attributesType, named != known {
            return TypeRefusal(
                reason: .attributesMismatch, type: known,
                problem: FieldError(
                    field: "attributes_type",
                    message: "the activity is of type \(known.debugDescription); a command cannot change it to \(named.debugDescription)"))
        }
        guard let name = command.attributesType ?? known, let type = byName[name] else { return nil }
        if let refusal = Self.attributesRefusal(of: command, type: type) { return refusal }
        if let problem = type.contentStateMismatch(merged) {
            return TypeRefusal(reason: .contentStateMismatch, type: name, problem: problem)
        }
        return nil
    }

    /// Why a command cannot apply to an activity whose state is not known
    /// here, or nil: its attributes and a full content-state (a start's, or
    /// one that replaces the state) are checked whole, a merge patch only
    /// in the fields it names. Only a command that names its type is checked.
    public func patchRefusal(of command: ActivityCommand) -> TypeRefusal? {
        guard let name = command.attributesType, let type = byName[name] else { return nil }
        if command.event == .start || command.replaceState {
            return refusal(of: command, known: nil, merged: command.contentState ?? .object([:]))
        }
        if let refusal = Self.attributesRefusal(of: command, type: type) { return refusal }
        guard let patch = command.contentState?.objectValue,
            let problem = SchemaField.patchMismatch(in: patch, fields: type.contentState, path: "content_state")
        else { return nil }
        return TypeRefusal(reason: .contentStateMismatch, type: name, problem: problem)
    }

    /// Why a command cannot apply to an activity whose state is `current`
    /// when this is known (the command merged into it is checked whole),
    /// else by ``patchRefusal(of:)``: the one check of the HTTP API and of
    /// `livedispatch types check`.
    public func refusal(of command: ActivityCommand, current: ActivityState?, now: UnixTime) -> TypeRefusal? {
        guard var merged = current else { return patchRefusal(of: command) }
        merged.fold(command, now: now)
        return refusal(of: command, known: current?.attributesType, merged: merged.contentState)
    }

    /// The refusal of a command whose attributes do not fit `type`.
    private static func attributesRefusal(of command: ActivityCommand, type: ActivityType) -> TypeRefusal? {
        guard let attributes = command.attributes, let problem = type.attributesMismatch(attributes) else { return nil }
        return TypeRefusal(reason: .attributesMismatch, type: type.name, problem: problem)
    }

    /// How a command to an activity of type `known` is checked.
    public func checking(_ command: ActivityCommand, known: String?) -> TypeChecking {
        guard let name = command.attributesType ?? known else { return .untyped }
        return byName[name] == nil ? .undeclared(name) : .checked(name)
    }
}

/// How a command was checked against its activity's type.
public enum TypeChecking: Sendable, Hashable {
    /// Against this declared type.
    case checked(String)
    /// The activity names a type no configuration declares: sent unchecked.
    case undeclared(String)
    /// Neither the activity nor the command names a type: sent unchecked.
    case untyped

    /// The `livedispatch_commands_unchecked_total{why}` label; nil when checked.
    public var uncheckedLabel: String? {
        switch self {
        case .checked: nil
        case .undeclared: "undeclared-type"
        case .untyped: "no-type"
        }
    }
}

/// A command refused because it does not fit its activity's type.
public struct TypeRefusal: Sendable, Hashable {
    public var reason: DeadLetterReason
    /// The activity type it was checked against.
    public var type: String
    /// The first mismatch: its dotted path (`content_state.score.home`) and what was wrong.
    public var problem: FieldError

    public init(reason: DeadLetterReason, type: String, problem: FieldError) {
        self.reason = reason
        self.type = type
        self.problem = problem
    }

    /// The dead letter's message.
    public var message: String {
        "does not fit activity type \(type): \(problem.field): \(problem.message)"
    }

    /// The dead letter's details.
    public var details: [String: JSONValue] {
        ["type": .string(type), "path": .string(problem.field), "problem": .string(problem.message)]
    }
}
