import LiveDispatchCore

/// A declared activity type: the schema of its `content_state` and,
/// optionally, of the static `attributes` a `start` carries.
struct ActivityTypeDefinition: Sendable {
    var name: String
    var contentState: [SchemaField]
    var attributes: [SchemaField]?
    var location: SourceLocation
}

/// A value a rule computes for a schema field: an expression, or a nested
/// mapping of fields for an object.
indirect enum FieldAssignment: Sendable {
    case value(name: String, expression: CompiledExpression, field: SchemaField)
    case object(name: String, fields: [FieldAssignment])

    var name: String {
        switch self {
        case .value(let name, _, _), .object(let name, _): name
        }
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
struct CompiledRule: Sendable {
    var name: String
    var topics: [String]
    var location: SourceLocation
    var when: CompiledExpression?
    var forEach: CompiledExpression?
    var activityID: Template
    var activityType: String
    var event: ActivityEvent
    var set: [FieldAssignment]
    var unset: [String]
    var replaceState: Bool
    var priority: PrioritySpecification?
    var alert: (title: Template, body: Template, sound: Template?)?
    var stale: DateSpecification?
    var dismissal: DateSpecification?
    var relevanceScore: CompiledExpression?
    var timestamp: CompiledExpression?
    var attributes: [FieldAssignment]?

    /// Longest list `for_each` walks; a longer one is an error, not a flood.
    static let maxForEach = 1000
}
