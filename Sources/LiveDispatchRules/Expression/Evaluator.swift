import LiveDispatchCore

/// What an expression can see while one event is evaluated.
struct EvaluationContext: Sendable {
    /// The event's JSON value.
    var event: JSONValue
    /// The record key as text, or null when the record had none.
    var key: Value
    var topic: String
    var headers: [String: String]
    /// `now()`, in Unix seconds: injected so evaluation is deterministic.
    var now: Double
    /// The record's timestamp, in Unix seconds.
    var recordTime: Double
    /// The current element and its position under `for_each`.
    var item: Value = .null
    var index: Int64 = 0
}

/// A compiled expression: a closure tree built once at load.
typealias Evaluator = @Sendable (EvaluationContext) throws(EvaluationFailure) -> Value

/// A compiled expression with its static type and its source text. A
/// class, so that rules share it without copying its parts.
final class CompiledExpression: Sendable {
    let evaluate: Evaluator
    let type: ValueType
    let syntax: Syntax
    let text: String

    init(evaluate: @escaping Evaluator, type: ValueType, syntax: Syntax, text: String) {
        self.evaluate = evaluate
        self.type = type
        self.syntax = syntax
        self.text = text
    }
}

/// A problem found while compiling: a type error, an unknown name or
/// function, at a span of the expression.
struct CompileError: Error, Sendable, Hashable {
    var message: String
    var expected: String?
    var span: Span
}

enum Stringify {
    /// Text of a value in a template or `string(x)`.
    static func text(_ value: Value) -> String {
        switch value {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .int(let number): String(number)
        case .double(let number): doubleText(number)
        case .string(let text): text
        case .time(let seconds): UnixTime(seconds: seconds).iso8601
        case .duration(let seconds): formatDuration(seconds)
        case .list, .map: value.json.serializedString()
        }
    }

    static func doubleText(_ number: Double) -> String {
        if number.rounded() == number, abs(number) < 1e15 { return String(Int64(number)) }
        return String(number)
    }
}

/// Equality with CEL's numeric cross-type rule: `1 == 1.0`.
func valuesEqual(_ left: Value, _ right: Value) -> Bool {
    switch (left, right) {
    case (.string(let a), .string(let b)): return a == b
    case (.int(let a), .int(let b)): return a == b
    case (.int, .double), (.double, .int), (.double, .double): return left.number == right.number
    case (.list(let a), .list(let b)): return a.count == b.count && zip(a, b).allSatisfy { valuesEqual(Value($0), Value($1)) }
    default: return left == right
    }
}

/// Ordering of numbers, strings, dates and durations; nil when the two
/// cannot be ordered.
func compareValues(_ left: Value, _ right: Value) -> Int? {
    func order<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a == b ? 0 : 1) }
    switch (left, right) {
    case (.int(let a), .int(let b)): return order(a, b)
    case (.int, .double), (.double, .int), (.double, .double):
        guard let a = left.number, let b = right.number, !a.isNaN, !b.isNaN else { return nil }
        return order(a, b)
    case (.string(let a), .string(let b)): return order(a, b)
    case (.time(let a), .time(let b)): return order(a, b)
    case (.duration(let a), .duration(let b)): return order(a, b)
    case (.bool(let a), .bool(let b)): return order(a ? 1 : 0, b ? 1 : 0)
    default: return nil
    }
}
