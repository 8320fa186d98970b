import LiveDispatchCore

/// Turns parsed expressions into closure trees, checking names, functions
/// and the types that are known before any event arrives.
struct ExpressionCompiler: Sendable {
    /// Whether `item` and `index` exist (the rule has `for_each`).
    var hasItem: Bool

    /// Names an expression may read.
    var names: [String] {
        ["event", "key", "topic", "headers", "timestamp"] + (hasItem ? ["item", "index"] : [])
    }

    func compile(_ text: String) throws(ExpressionErrorOrCompile) -> CompiledExpression {
        let syntax: Syntax
        do {
            syntax = try ExpressionParser.parse(text)
        } catch {
            throw .syntax(error)
        }
        do {
            let (evaluate, type) = try compile(syntax)
            return CompiledExpression(evaluate: evaluate, type: type, syntax: syntax, text: text)
        } catch {
            throw .compile(error)
        }
    }

    func compile(_ syntax: Syntax) throws(CompileError) -> (Evaluator, ValueType) {
        switch syntax {
        case .literal(let value, _):
            return ({ _ in value }, value.type)
        case .name(let name, let span):
            return try compileName(name, span: span)
        case .member(let base, let field, let span):
            if let path = Self.eventPath(syntax) {
                return (Self.eventPathEvaluator(path), .dyn)
            }
            let (baseEval, baseType) = try compile(base)
            guard baseType == .dyn || baseType == .map || baseType == .null else {
                throw CompileError(message: "cannot read field '\(field)' of \(baseType.article)", expected: "an object", span: span)
            }
            return ({ context throws(EvaluationFailure) in
                switch try baseEval(context) {
                case .map(let fields): return fields[field].map(Value.init) ?? .null
                case .null: return .null
                case let other: throw EvaluationFailure("cannot read field '\(field)' of \(other.type.article)")
                }
            }, .dyn)
        case .index(let base, let subscriptSyntax, let span):
            let (baseEval, baseType) = try compile(base)
            let (indexEval, indexType) = try compile(subscriptSyntax)
            guard [.dyn, .list, .map, .null].contains(baseType) else {
                throw CompileError(message: "cannot index \(baseType.article)", expected: "a list or an object", span: span)
            }
            guard [.dyn, .int, .string].contains(indexType) else {
                throw CompileError(message: "an index cannot be \(indexType.article)", expected: "an int for a list or a string for an object", span: subscriptSyntax.span)
            }
            return ({ context throws(EvaluationFailure) in
                let container = try baseEval(context)
                let index = try indexEval(context)
                switch (container, index) {
                case (.list(let elements), .int(let position)):
                    guard position >= 0, position < elements.count else { return .null }
                    return Value(elements[Int(position)])
                case (.map(let fields), .string(let name)):
                    return fields[name].map(Value.init) ?? .null
                case (.null, _):
                    return .null
                default:
                    throw EvaluationFailure("cannot index \(container.type.article) with \(index.type.article)")
                }
            }, .dyn)
        case .list(let elements, _):
            var evaluators: [Evaluator] = []
            for element in elements { evaluators.append(try compile(element).0) }
            let all = evaluators
            return ({ context throws(EvaluationFailure) in
                var values: [JSONValue] = []
                values.reserveCapacity(all.count)
                for evaluate in all { values.append(try evaluate(context).json) }
                return .list(values)
            }, .list)
        case .unary(let op, let operand, let span):
            return try compileUnary(op, operand, span: span)
        case .binary(let op, let left, let right, let span):
            return try compileBinary(op, left, right, span: span)
        case .conditional(let condition, let whenTrue, let whenFalse, _):
            let (conditionEval, conditionType) = try compile(condition)
            guard conditionType.admits(.bool) else {
                throw CompileError(message: "the condition of '?:' is \(conditionType.article)", expected: "a bool", span: condition.span)
            }
            let (trueEval, trueType) = try compile(whenTrue)
            let (falseEval, falseType) = try compile(whenFalse)
            // A branch that is null leaves the other's type; mixed types are known only at run time.
            let type: ValueType
            if trueType == falseType || falseType == .null { type = trueType }
            else if trueType == .null { type = falseType }
            else { type = .dyn }
            return ({ context throws(EvaluationFailure) in
                switch try conditionEval(context) {
                case .bool(true): return try trueEval(context)
                case .bool(false): return try falseEval(context)
                case let other: throw EvaluationFailure("the condition of '?:' is \(other.type.article), expected a bool")
                }
            }, type)
        case .call(let name, let arguments, let span):
            return try compileCall(name, arguments, span: span)
        }
    }

    private func compileName(_ name: String, span: Span) throws(CompileError) -> (Evaluator, ValueType) {
        switch name {
        case "event": return ({ context in Value(context.event) }, .dyn)
        case "key": return ({ context in context.key }, .dyn)
        case "topic": return ({ context in .string(context.topic) }, .string)
        case "timestamp": return ({ context in .time(context.recordTime) }, .time)
        case "headers":
            return ({ context in
                var fields: [String: JSONValue] = [:]
                for (name, value) in context.headers { fields[name] = .string(value) }
                return .map(fields)
            }, .map)
        case "item" where hasItem: return ({ context in context.item }, .dyn)
        case "index" where hasItem: return ({ context in .int(context.index) }, .int)
        default:
            let hint = (name == "item" || name == "index") ? " ('\(name)' exists only in rules with for_each)" : ""
            throw CompileError(
                message: "unknown name '\(name)'\(hint)", expected: names.joined(separator: ", "), span: span)
        }
    }

    private func compileUnary(_ op: UnaryOperator, _ operand: Syntax, span: Span) throws(CompileError) -> (Evaluator, ValueType) {
        let (operandEval, operandType) = try compile(operand)
        switch op {
        case .not:
            guard operandType.admits(.bool) else {
                throw CompileError(message: "'!' cannot be applied to \(operandType.article)", expected: "a bool", span: span)
            }
            return ({ context throws(EvaluationFailure) in
                let value = try operandEval(context)
                guard case .bool(let flag) = value else {
                    throw EvaluationFailure("'!' cannot be applied to \(value.type.article), expected a bool")
                }
                return .bool(!flag)
            }, .bool)
        case .negate:
            guard [.dyn, .int, .double, .duration].contains(operandType) else {
                throw CompileError(message: "'-' cannot be applied to \(operandType.article)", expected: "a number or a duration", span: span)
            }
            return ({ context throws(EvaluationFailure) in
                switch try operandEval(context) {
                case .int(let value):
                    guard value != .min else { throw EvaluationFailure("integer overflow in '-'") }
                    return .int(-value)
                case .double(let value): return .double(-value)
                case .duration(let value): return .duration(-value)
                case let other: throw EvaluationFailure("'-' cannot be applied to \(other.type.article), expected a number")
                }
            }, operandType)
        }
    }

    private func compileBinary(_ op: BinaryOperator, _ left: Syntax, _ right: Syntax, span: Span) throws(CompileError) -> (Evaluator, ValueType) {
        let (leftEval, leftType) = try compile(left)
        let (rightEval, rightType) = try compile(right)
        let symbol = op.rawValue
        switch op {
        case .and, .or:
            for (type, side) in [(leftType, left), (rightType, right)] where !type.admits(.bool) {
                throw CompileError(message: "'\(symbol)' needs bools on both sides, got \(type.article)", expected: "a bool", span: side.span)
            }
            let isAnd = op == .and
            return ({ context throws(EvaluationFailure) in
                let leftValue = try leftEval(context)
                guard case .bool(let first) = leftValue else {
                    throw EvaluationFailure("'\(symbol)' needs bools, got \(leftValue.type.article) on the left")
                }
                if first != isAnd { return .bool(first) }
                let rightValue = try rightEval(context)
                guard case .bool(let second) = rightValue else {
                    throw EvaluationFailure("'\(symbol)' needs bools, got \(rightValue.type.article) on the right")
                }
                return .bool(second)
            }, .bool)
        case .equal, .notEqual:
            if leftType != .dyn, rightType != .dyn, leftType != .null, rightType != .null, leftType != rightType,
                !(leftType.isNumeric && rightType.isNumeric)
            {
                throw CompileError(
                    message: "'\(symbol)' compares \(leftType.article) with \(rightType.article), which never match",
                    expected: "values of the same type", span: span)
            }
            let wantEqual = op == .equal
            // Comparing with a constant, the usual `event.type == "goal"`: one call fewer.
            if case .literal(let constant, _) = right {
                return ({ context throws(EvaluationFailure) in
                    .bool(valuesEqual(try leftEval(context), constant) == wantEqual)
                }, .bool)
            }
            return ({ context throws(EvaluationFailure) in
                .bool(valuesEqual(try leftEval(context), try rightEval(context)) == wantEqual)
            }, .bool)
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            let orderable: [ValueType] = [.dyn, .int, .double, .string, .time, .duration, .bool]
            for (type, side) in [(leftType, left), (rightType, right)] where !orderable.contains(type) {
                throw CompileError(message: "'\(symbol)' cannot order \(type.article)", expected: "numbers, strings, dates or durations", span: side.span)
            }
            if leftType != .dyn, rightType != .dyn, leftType != rightType, !(leftType.isNumeric && rightType.isNumeric) {
                throw CompileError(message: "'\(symbol)' compares \(leftType.article) with \(rightType.article)", expected: "values of the same type", span: span)
            }
            let accept: @Sendable (Int) -> Bool
            switch op {
            case .less: accept = { $0 < 0 }
            case .lessOrEqual: accept = { $0 <= 0 }
            case .greater: accept = { $0 > 0 }
            default: accept = { $0 >= 0 }
            }
            return ({ context throws(EvaluationFailure) in
                let a = try leftEval(context)
                let b = try rightEval(context)
                guard let order = compareValues(a, b) else {
                    throw EvaluationFailure("'\(symbol)' cannot compare \(a.type.article) with \(b.type.article)")
                }
                return .bool(accept(order))
            } as Evaluator, .bool)
        case .in:
            guard [.dyn, .list, .map, .null].contains(rightType) else {
                throw CompileError(message: "'in' needs a list or an object on the right, got \(rightType.article)", expected: "a list or an object", span: right.span)
            }
            return ({ context throws(EvaluationFailure) in
                let needle = try leftEval(context)
                switch try rightEval(context) {
                case .list(let elements): return .bool(elements.contains { valuesEqual(Value($0), needle) })
                case .map(let fields):
                    guard case .string(let name) = needle else { return .bool(false) }
                    return .bool(fields[name] != nil)
                case .null: return .bool(false)
                case let other: throw EvaluationFailure("'in' needs a list or an object on the right, got \(other.type.article)")
                }
            }, .bool)
        case .coalesce:
            let type: ValueType = leftType == rightType ? leftType : (leftType == .null ? rightType : .dyn)
            return ({ context throws(EvaluationFailure) in
                let value = try leftEval(context)
                if case .null = value { return try rightEval(context) }
                return value
            }, type)
        case .add, .subtract, .multiply, .divide, .remainder:
            let type = try arithmeticType(op, leftType, rightType, span: span)
            let evaluate: Evaluator = { context throws(EvaluationFailure) in
                try arithmetic(op, try leftEval(context), try rightEval(context))
            }
            if left.isLiteral && right.isLiteral { return (try Self.fold(evaluate, span: span), type) }
            return (evaluate, type)
        }
    }

    private func arithmeticType(_ op: BinaryOperator, _ left: ValueType, _ right: ValueType, span: Span) throws(CompileError) -> ValueType {
        if left == .dyn || right == .dyn {
            let allowed: [ValueType] = [.dyn, .int, .double, .string, .time, .duration]
            for type in [left, right] where !allowed.contains(type) {
                throw CompileError(message: "'\(op.rawValue)' cannot be applied to \(type.article)", expected: "numbers, strings, dates or durations", span: span)
            }
            return .dyn
        }
        switch (op, left, right) {
        case (_, .int, .int): return .int
        case (_, .int, .double), (_, .double, .int), (_, .double, .double): return op == .remainder ? .int : .double
        case (.add, .string, .string): return .string
        case (.add, .time, .duration), (.add, .duration, .time), (.subtract, .time, .duration): return .time
        case (.subtract, .time, .time), (.add, .duration, .duration), (.subtract, .duration, .duration): return .duration
        case (.multiply, .duration, .int), (.multiply, .duration, .double), (.multiply, .int, .duration),
            (.multiply, .double, .duration), (.divide, .duration, .int), (.divide, .duration, .double):
            return .duration
        default:
            throw CompileError(
                message: "'\(op.rawValue)' cannot be applied to \(left.article) and \(right.article)",
                expected: "numbers, two strings for '+', or dates and durations", span: span)
        }
    }

    private func compileCall(_ name: String, _ arguments: [Syntax], span: Span) throws(CompileError) -> (Evaluator, ValueType) {
        if name == "has" {
            guard arguments.count == 1 else {
                throw CompileError(message: "has() takes 1 argument, got \(arguments.count)", expected: "has(event.field)", span: span)
            }
            guard case .member(let base, let field, _) = arguments[0] else {
                throw CompileError(message: "has() needs a field selection", expected: "has(event.field)", span: arguments[0].span)
            }
            let (baseEval, _) = try compile(base)
            return ({ context throws(EvaluationFailure) in
                switch try baseEval(context) {
                case .map(let fields): return .bool(fields[field] != nil)
                case .null: return .bool(false)
                case let other: throw EvaluationFailure("has() cannot look for field '\(field)' in \(other.type.article)")
                }
            }, .bool)
        }
        guard let function = Builtins.functions[name] else {
            throw CompileError(
                message: "unknown function '\(name)'",
                expected: Builtins.functions.keys.sorted().joined(separator: ", ") + ", has", span: span)
        }
        guard function.arity.contains(arguments.count) else {
            let count = function.arity.lowerBound == function.arity.upperBound
                ? "\(function.arity.lowerBound)" : "\(function.arity.lowerBound) to \(function.arity.upperBound)"
            throw CompileError(
                message: "\(name)() takes \(count) argument\(function.arity.upperBound == 1 ? "" : "s"), got \(arguments.count)",
                expected: function.signature, span: span)
        }
        var evaluators: [Evaluator] = []
        var types: [ValueType] = []
        for (position, argument) in arguments.enumerated() {
            let (evaluate, type) = try compile(argument)
            let accepted = function.accepts(position)
            if type != .dyn, !accepted.contains(type) {
                throw CompileError(
                    message: "\(name)() cannot take \(type.article)", expected: function.signature, span: argument.span)
            }
            evaluators.append(evaluate)
            types.append(type)
        }
        if name == "duration", case .literal(.string(let text), let literalSpan) = arguments[0], parseDuration(text) == nil {
            throw CompileError(message: "\(text.debugDescription) is not a duration", expected: "a duration such as \"15m\", \"1h30m\" or \"90s\"", span: literalSpan)
        }
        if name == "date", case .literal(.string(let text), let literalSpan) = arguments[0], UnixTime(iso8601: text) == nil {
            throw CompileError(message: "\(text.debugDescription) is not a date", expected: "ISO-8601 such as \"2026-02-08T23:30:00Z\"", span: literalSpan)
        }
        let evaluate = try function.make(evaluators, types, span)
        // Pure functions of constants are computed once, here; one that
        // cannot succeed is an error now rather than on every event.
        if name != "now", arguments.allSatisfy(\.isLiteral) {
            return (try Self.fold(evaluate, span: span), function.result(types))
        }
        return (evaluate, function.result(types))
    }

    /// Evaluates an expression made only of constants once, at load.
    static func fold(_ evaluate: Evaluator, span: Span) throws(CompileError) -> Evaluator {
        let empty = EvaluationContext(event: .null, key: .null, topic: "", headers: [:], now: 0, recordTime: 0)
        do {
            let constant = try evaluate(empty)
            return { _ in constant }
        } catch {
            throw CompileError(message: error.message, expected: "an expression that can be computed", span: span)
        }
    }

    /// The field names of `event.a.b.c`, or nil when the syntax is not such a path.
    static func eventPath(_ syntax: Syntax) -> [String]? {
        switch syntax {
        case .name("event", _): return []
        case .member(let base, let field, _):
            guard let prefix = eventPath(base) else { return nil }
            return prefix + [field]
        default: return nil
        }
    }

    /// Reads `event.a.b.c` straight from the event's JSON, without building
    /// intermediate values: the common case, kept fast.
    static func eventPathEvaluator(_ path: [String]) -> Evaluator {
        if path.count == 1 {
            let field = path[0]
            return { context in
                guard case .object(let fields) = context.event, let value = fields[field] else { return .null }
                return Value(value)
            }
        }
        return { context throws(EvaluationFailure) in
            var current = context.event
            for field in path {
                switch current {
                case .object(let fields):
                    guard let next = fields[field] else { return .null }
                    current = next
                case .null:
                    return .null
                default:
                    throw EvaluationFailure("cannot read field '\(field)' of \(Value(current).type.article)")
                }
            }
            return Value(current)
        }
    }
}

/// Either kind of problem an expression can have, before it runs.
enum ExpressionErrorOrCompile: Error, Sendable, Hashable {
    case syntax(ExpressionError)
    case compile(CompileError)

    var offset: Int {
        switch self {
        case .syntax(let error): error.offset
        case .compile(let error): error.span.start
        }
    }

    var message: String {
        switch self {
        case .syntax(let error): error.message
        case .compile(let error): error.message
        }
    }

    var expected: String? {
        switch self {
        case .syntax(let error): error.expected
        case .compile(let error): error.expected
        }
    }
}

/// Arithmetic at run time, with overflow and division by zero as errors.
func arithmetic(_ op: BinaryOperator, _ left: Value, _ right: Value) throws(EvaluationFailure) -> Value {
    switch (left, right) {
    case (.int(let a), .int(let b)):
        let result: (partialValue: Int64, overflow: Bool)
        switch op {
        case .add: result = a.addingReportingOverflow(b)
        case .subtract: result = a.subtractingReportingOverflow(b)
        case .multiply: result = a.multipliedReportingOverflow(by: b)
        case .divide:
            guard b != 0 else { throw EvaluationFailure("division by zero") }
            result = a.dividedReportingOverflow(by: b)
        case .remainder:
            guard b != 0 else { throw EvaluationFailure("remainder of a division by zero") }
            result = a.remainderReportingOverflow(dividingBy: b)
        default: throw EvaluationFailure("'\(op.rawValue)' is not arithmetic")
        }
        guard !result.overflow else { throw EvaluationFailure("integer overflow in '\(op.rawValue)'") }
        return .int(result.partialValue)
    case (.int, .double), (.double, .int), (.double, .double):
        guard let a = left.number, let b = right.number else { break }
        let result: Double
        switch op {
        case .add: result = a + b
        case .subtract: result = a - b
        case .multiply: result = a * b
        case .divide:
            guard b != 0 else { throw EvaluationFailure("division by zero") }
            result = a / b
        case .remainder:
            guard b != 0 else { throw EvaluationFailure("remainder of a division by zero") }
            result = a.truncatingRemainder(dividingBy: b)
        default: throw EvaluationFailure("'\(op.rawValue)' is not arithmetic")
        }
        guard result.isFinite else { throw EvaluationFailure("'\(op.rawValue)' gave a number out of range") }
        return .double(result)
    case (.string(let a), .string(let b)) where op == .add:
        guard a.utf8.count + b.utf8.count <= Builtins.maxStringBytes else {
            throw EvaluationFailure("string longer than \(Builtins.maxStringBytes) bytes")
        }
        return .string(a + b)
    case (.time(let a), .duration(let b)) where op == .add: return .time(a + b)
    case (.duration(let a), .time(let b)) where op == .add: return .time(a + b)
    case (.time(let a), .duration(let b)) where op == .subtract: return .time(a - b)
    case (.time(let a), .time(let b)) where op == .subtract: return .duration(a - b)
    case (.duration(let a), .duration(let b)) where op == .add: return .duration(a + b)
    case (.duration(let a), .duration(let b)) where op == .subtract: return .duration(a - b)
    case (.duration(let a), _) where op == .multiply && right.number != nil: return .duration(a * (right.number ?? 0))
    case (_, .duration(let b)) where op == .multiply && left.number != nil: return .duration(b * (left.number ?? 0))
    case (.duration(let a), _) where op == .divide && right.number != nil:
        guard let divisor = right.number, divisor != 0 else { throw EvaluationFailure("division by zero") }
        return .duration(a / divisor)
    default:
        break
    }
    throw EvaluationFailure("'\(op.rawValue)' cannot be applied to \(left.type.article) and \(right.type.article)")
}
