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
    /// as this type, or nil when it decodes (``mismatches(in:path:into:)``).
    public func mismatch(in json: JSONValue, path: String) -> FieldError? {
        var found = SchemaProblems(limit: 1)
        mismatches(in: json, path: path, into: &found)
        return found.problems.first
    }

    /// Every place where `json` is not what the app's decoder reads as
    /// this type, up to `found`'s limit. `path` is the dotted path of
    /// `json` (`content_state.score`). A date is a number (seconds since
    /// 2001-01-01, the default `Date` strategy); an object has every
    /// required field, no null one and none it does not declare (a
    /// misspelled field would be dropped by the decoder, and the field it
    /// meant would be missing or keep its old value).
    public func mismatches(in json: JSONValue, path: String, into found: inout SchemaProblems) {
        func expected(_ what: String) -> FieldError {
            let text = json.serializedString()
            let preview = text.count > 60 ? String(text.prefix(57)) + "..." : text
            return FieldError(field: path, message: "expected \(what), got \(json.typeName) \(preview)")
        }
        switch self {
        case .int:
            switch json {
            case .integer: return
            case .double(let number): if Int64(exactly: number) == nil { found.add(expected("an int")) }
            default: found.add(expected("an int"))
            }
        case .double:
            if json.numberValue == nil { found.add(expected("a double")) }
        case .date:
            if json.numberValue == nil { found.add(expected("a date (seconds since 2001-01-01)")) }
        case .string:
            if case .string = json { return }
            found.add(expected("a string"))
        case .bool:
            if case .bool = json { return }
            found.add(expected("a bool"))
        case .enumeration(let members):
            guard case .string(let text) = json else { return found.add(expected("one of \(members.joined(separator: ", "))")) }
            if !members.contains(text) {
                found.add(FieldError(field: path, message: "\(text.debugDescription) is not one of \(members.joined(separator: ", "))"))
            }
        case .object(let fields):
            guard case .object(let members) = json else { return found.add(expected("an object")) }
            SchemaField.mismatches(in: members, fields: fields, path: path, into: &found)
        case .array(let element):
            guard case .array(let items) = json else { return found.add(expected("a list of \(element.name)")) }
            for (position, item) in items.enumerated() where !found.isFull {
                element.mismatches(in: item, path: "\(path)[\(position)]", into: &found)
            }
        }
    }
}

/// The problems found in one value, in the order found, at most `limit`
/// of them kept; `count` counts every one.
public struct SchemaProblems: Sendable, Hashable {
    /// How many problems a refusal lists at most.
    public static let defaultLimit = 20

    public let limit: Int
    public private(set) var problems: [FieldError] = []
    public private(set) var count = 0

    public init(limit: Int = SchemaProblems.defaultLimit) {
        self.limit = max(1, limit)
    }

    public var isEmpty: Bool { count == 0 }
    /// Whether the list is full: later problems are only counted.
    public var isFull: Bool { problems.count >= limit }

    public mutating func add(_ problem: FieldError) {
        count += 1
        if problems.count < limit { problems.append(problem) }
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

    /// Every field of `members` that does not fit `fields`: a required
    /// one missing or null, one of the wrong type, one not declared.
    /// Fields are looked at in declaration order, then the undeclared ones
    /// by name, so the same object always lists the same problems. A
    /// missing field and an undeclared one that looks like its misspelling
    /// name each other.
    static func mismatches(in members: [String: JSONValue], fields: [SchemaField], path: String, into found: inout SchemaProblems) {
        let prefix = path.isEmpty ? "" : path + "."
        let undeclared = members.keys.filter { name in !fields.contains { $0.name == name } }.sorted()
        for field in fields {
            guard let value = members[field.name], value != .null else {
                if field.optional { continue }
                let given = undeclared.first { suggestion(for: $0, among: fields) == field.name }
                found.add(FieldError(
                    field: prefix + field.name,
                    message: "is required (\(field.type.name)) and missing" + (given.map { " (\(prefix + $0) was given: a misspelling?)" } ?? "")))
                continue
            }
            field.type.mismatches(in: value, path: prefix + field.name, into: &found)
        }
        for name in undeclared { found.add(self.undeclared(name, fields: fields, prefix: prefix)) }
    }

    /// The declared field `name` most likely misspells: the same but for
    /// case, or the nearest within two edits (the first declared of equals).
    static func suggestion(for name: String, among fields: [SchemaField]) -> String? {
        name.nearest(among: fields.map(\.name), maxDistance: 2)
    }

    /// A field the type does not declare, with the declared one it may be a misspelling of.
    private static func undeclared(_ name: String, fields: [SchemaField], prefix: String) -> FieldError {
        FieldError(
            field: prefix + name,
            message: "is not a field of the type" + (suggestion(for: name, among: fields).map { " (did you mean '\($0)'?)" } ?? ""))
    }

    /// Every member of a merge patch on an object of `fields` that cannot
    /// be part of one: an undeclared field, a required one removed (null),
    /// or a value of the wrong type; an object member is itself a patch.
    /// Fields the patch does not name are not looked at: for when the
    /// state it applies to is not known here.
    static func patchMismatches(in members: [String: JSONValue], fields: [SchemaField], path: String, into found: inout SchemaProblems) {
        let prefix = path.isEmpty ? "" : path + "."
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            guard let field = fields.first(where: { $0.name == name }) else {
                found.add(undeclared(name, fields: fields, prefix: prefix))
                continue
            }
            switch (value, field.type) {
            case (.null, _):
                if !field.optional { found.add(FieldError(field: prefix + name, message: "is required (\(field.type.name)) and cannot be removed")) }
            case (.object(let nested), .object(let nestedFields)):
                patchMismatches(in: nested, fields: nestedFields, path: prefix + name, into: &found)
            default:
                field.type.mismatches(in: value, path: prefix + name, into: &found)
            }
        }
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

    /// Every place where a full content-state does not fit.
    public func contentStateMismatches(_ state: JSONValue, into found: inout SchemaProblems) {
        SchemaType.object(contentState).mismatches(in: state, path: "content_state", into: &found)
    }

    /// The first place where attributes do not fit; nil when they fit or
    /// the type declares none.
    public func attributesMismatch(_ attributes: JSONValue) -> FieldError? {
        guard let fields = self.attributes else { return nil }
        return SchemaType.object(fields).mismatch(in: attributes, path: "attributes")
    }

    /// Every place where attributes do not fit; none when the type declares none.
    public func attributesMismatches(_ attributes: JSONValue, into found: inout SchemaProblems) {
        guard let fields = self.attributes else { return }
        SchemaType.object(fields).mismatches(in: attributes, path: "attributes", into: &found)
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

    /// Why `attributes_type` (a push-to-start registration's, a start's)
    /// names no declared type, or nil when it names one or no type is
    /// declared: the declared names, and the nearest as a suggestion.
    public func undeclaredProblem(_ name: String, field: String = "attributes_type") -> FieldError? {
        guard !isEmpty, byName[name] == nil else { return nil }
        let declared = names
        let suggestion = name.nearest(among: declared, maxDistance: max(2, name.count / 4))
        let shown = String(name.prefix(64)).debugDescription
        return FieldError(
            field: field,
            message: "\(shown) is not a declared activity type" + (suggestion.map { " (did you mean '\($0)'?)" } ?? "")
                + "; declared: \(declared.joined(separator: ", "))")
    }

    /// Why a command cannot apply to an activity of type `known` (nil: the
    /// activity has none yet) once its content-state is folded into
    /// `merged`, or nil when it fits, or when its type is not declared
    /// (``checking(_:known:)`` tells those apart). Every problem is
    /// listed (up to ``SchemaProblems/defaultLimit``): attributes first,
    /// then the content-state.
    public func refusal(of command: ActivityCommand, known: String?, merged: JSONValue) -> TypeRefusal? {
        if let known, let named = command.attributesType, named != known {
            return TypeRefusal(
                reason: .attributesMismatch, type: known,
                problem: FieldError(
                    field: "attributes_type",
                    message: "the activity is of type \(known.debugDescription); a command cannot change it to \(named.debugDescription)"))
        }
        guard let name = command.attributesType ?? known, let type = byName[name] else { return nil }
        var found = SchemaProblems()
        if let attributes = command.attributes { type.attributesMismatches(attributes, into: &found) }
        let reason: DeadLetterReason = found.isEmpty ? .contentStateMismatch : .attributesMismatch
        type.contentStateMismatches(merged, into: &found)
        return TypeRefusal(reason: reason, type: name, found: found)
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
        var found = SchemaProblems()
        if let attributes = command.attributes { type.attributesMismatches(attributes, into: &found) }
        let reason: DeadLetterReason = found.isEmpty ? .contentStateMismatch : .attributesMismatch
        if let patch = command.contentState?.objectValue {
            SchemaField.patchMismatches(in: patch, fields: type.contentState, path: "content_state", into: &found)
        }
        return TypeRefusal(reason: reason, type: name, found: found)
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
    /// Every mismatch found, up to a limit, in the order found: each its
    /// dotted path (`content_state.score.home`) and what was wrong. Never empty.
    public var problems: [FieldError]
    /// How many mismatches there are, listed or not.
    public var count: Int

    public init(reason: DeadLetterReason, type: String, problem: FieldError) {
        self.init(reason: reason, type: type, problems: [problem], count: 1)
    }

    public init(reason: DeadLetterReason, type: String, problems: [FieldError], count: Int) {
        self.reason = reason
        self.type = type
        self.problems = problems
        self.count = max(count, problems.count)
    }

    /// Nil when nothing was found.
    init?(reason: DeadLetterReason, type: String, found: SchemaProblems) {
        guard !found.problems.isEmpty else { return nil }
        self.init(reason: reason, type: type, problems: found.problems, count: found.count)
    }

    /// The first mismatch.
    public var problem: FieldError {
        problems.first ?? FieldError(field: "", message: "does not fit")
    }

    /// How many problems the message spells out; `details` lists them all.
    static let inMessage = 3

    /// The dead letter's message: the first few problems, and how many more.
    public var message: String {
        let shown = problems.prefix(Self.inMessage).map { "\($0.field): \($0.message)" }.joined(separator: "; ")
        let more = count - min(problems.count, Self.inMessage)
        return "does not fit activity type \(type): \(shown)" + (more > 0 ? " (and \(more) more)" : "")
    }

    /// The dead letter's details: the first problem's `path` and
    /// `problem`, every listed one in `problems`, and their `count`.
    public var details: [String: JSONValue] {
        var details: [String: JSONValue] = ["type": .string(type), "path": .string(problem.field), "problem": .string(problem.message)]
        if count > 1 {
            details["problems"] = .array(problems.map { .object(["path": .string($0.field), "problem": .string($0.message)]) })
            details["count"] = .integer(Int64(count))
        }
        return details
    }
}
