import LiveDispatchCore

/// A declared activity type: the schema of its `content_state` and,
/// optionally, of the static `attributes` a `start` carries.
struct ActivityTypeDefinition: Sendable {
    var type: ActivityType
    var location: SourceLocation

    var name: String { type.name }
    var contentState: [SchemaField] { type.contentState }
    var attributes: [SchemaField]? { type.attributes }
}

/// A value a rule computes for a schema field: an expression, or a nested
/// mapping of fields for an object. A class, so evaluation shares it.
final class FieldAssignment: Sendable {
    enum Kind: Sendable {
        case value(CompiledExpression, SchemaField)
        case object([FieldAssignment])
    }

    let name: String
    let kind: Kind

    init(name: String, kind: Kind) {
        self.name = name
        self.kind = kind
    }
}

/// When a date (stale or dismissal) falls: a fixed or computed time after
/// the command's timestamp, or a computed date.
enum DateSpecification: Sendable {
    case after(Double)
    case afterExpression(CompiledExpression)
    case at(CompiledExpression)
}

/// How a rule sets the priority.
enum PrioritySpecification: Sendable {
    case constant(PushPriority)
    case expression(CompiledExpression)
}

/// A rule after parsing, resolving and type checking: what the worker runs.
/// A class, so that running it never copies its many fields.
final class CompiledRule: Sendable {
    let name: String
    let topics: [String]
    let location: SourceLocation
    let when: CompiledExpression?
    let forEach: CompiledExpression?
    let activityID: Template
    let activityType: String
    let event: ActivityEvent
    let set: [FieldAssignment]
    let unset: [String]
    let replaceState: Bool
    let priority: PrioritySpecification?
    let alert: AlertTemplates?
    let stale: DateSpecification?
    let dismissal: DateSpecification?
    let relevanceScore: CompiledExpression?
    let timestamp: CompiledExpression?
    let attributes: [FieldAssignment]?
    /// For a start: the audiences whose push-to-start tokens it is sent to.
    let audiences: [Template]
    /// The app of the activities the rule commands (`app`); nil for the only app.
    let app: String?
    /// For a start: the activity is broadcast, with this channel storage policy.
    let broadcast: Bool?
    let storagePolicy: ChannelStoragePolicy?

    /// Longest list `for_each` walks; a longer one is an error, not a flood.
    static let maxForEach = 1000

    /// When `when` is `event.F == "text"` (alone or as the first part of an
    /// `&&`), the field and the text: rules of one topic that test the same
    /// field share one lookup, and a rule whose text differs is skipped
    /// without running. Only top-level fields, whose lookup cannot fail.
    let guardCondition: (field: String, text: String)?

    init(
        name: String, topics: [String], location: SourceLocation, when: CompiledExpression?, forEach: CompiledExpression?,
        activityID: Template, activityType: String, event: ActivityEvent, set: [FieldAssignment], unset: [String],
        replaceState: Bool, priority: PrioritySpecification?, alert: AlertTemplates?, stale: DateSpecification?,
        dismissal: DateSpecification?, relevanceScore: CompiledExpression?, timestamp: CompiledExpression?,
        attributes: [FieldAssignment]?, audiences: [Template] = [], app: String? = nil, broadcast: Bool? = nil,
        storagePolicy: ChannelStoragePolicy? = nil
    ) {
        self.app = app
        self.name = name
        self.topics = topics
        self.location = location
        self.when = when
        self.forEach = forEach
        self.activityID = activityID
        self.activityType = activityType
        self.event = event
        self.set = set
        self.unset = unset
        self.replaceState = replaceState
        self.priority = priority
        self.alert = alert
        self.stale = stale
        self.dismissal = dismissal
        self.relevanceScore = relevanceScore
        self.timestamp = timestamp
        self.attributes = attributes
        self.audiences = audiences
        self.broadcast = broadcast
        self.storagePolicy = storagePolicy
        guardCondition = when.flatMap { Self.guardCondition($0.syntax) }
    }

    private static func guardCondition(_ syntax: Syntax) -> (field: String, text: String)? {
        var leftmost = syntax
        while case .binary(.and, let left, _, _) = leftmost { leftmost = left }
        if case .binary(.equal, .member(.name("event", _), let field, _), .literal(.string(let text), _), _) = leftmost {
            return (field, text)
        }
        return nil
    }
}

/// The alert of a rule: title, body and sound templates.
struct AlertTemplates: Sendable {
    var title: AlertTextTemplate
    var body: AlertTextTemplate
    var sound: Template?
}

/// A title or body template: text, or a localized key and its arguments,
/// each a template.
enum AlertTextTemplate: Sendable {
    case text(Template)
    case localized(key: Template, arguments: [Template])

    func render(_ context: EvaluationContext, field: String) throws(EvaluationFailure) -> AlertText {
        switch self {
        case .text(let template):
            return .text(try template.render(context, field: field))
        case .localized(let key, let arguments):
            let renderedKey = try key.render(context, field: "\(field).loc_key")
            guard !renderedKey.isEmpty else { throw EvaluationFailure("\(field).loc_key: the key is empty") }
            var rendered: [String] = []
            for (index, argument) in arguments.enumerated() {
                rendered.append(try argument.render(context, field: "\(field).loc_args[\(index)]"))
            }
            return .localized(key: renderedKey, arguments: rendered)
        }
    }
}
