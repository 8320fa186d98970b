import LiveDispatchCore

/// A function rule authors can call.
struct Builtin: Sendable {
    enum Body: Sendable {
        case nullary(@Sendable (EvaluationContext) -> Value)
        case unary(@Sendable (Value) throws(EvaluationFailure) -> Value)
        case binary(@Sendable (Value, Value) throws(EvaluationFailure) -> Value)
        case variadic(@Sendable ([Value]) throws(EvaluationFailure) -> Value)
    }

    var arity: ClosedRange<Int>
    var signature: String
    /// Accepted static types per argument; the last entry covers the rest.
    var parameters: [[ValueType]]
    var result: @Sendable ([ValueType]) -> ValueType
    var body: Body

    func accepts(_ position: Int) -> [ValueType] {
        parameters.isEmpty ? [] : parameters[min(position, parameters.count - 1)]
    }

    func make(_ arguments: [Evaluator], _ types: [ValueType], _ span: Span) throws(CompileError) -> Evaluator {
        switch body {
        case .nullary(let function):
            return { context in function(context) }
        case .unary(let function):
            let first = arguments[0]
            return { context throws(EvaluationFailure) in try function(try first(context)) }
        case .binary(let function):
            let first = arguments[0]
            let second = arguments[1]
            return { context throws(EvaluationFailure) in try function(try first(context), try second(context)) }
        case .variadic(let function):
            return { context throws(EvaluationFailure) in
                var values: [Value] = []
                values.reserveCapacity(arguments.count)
                for argument in arguments { values.append(try argument(context)) }
                return try function(values)
            }
        }
    }
}

enum Builtins {
    /// Longest string an expression may build, in UTF-8 bytes.
    static let maxStringBytes = 4096

    static let numbers: [ValueType] = [.int, .double]

    static func fixed(_ type: ValueType) -> @Sendable ([ValueType]) -> ValueType { { _ in type } }

    static let functions: [String: Builtin] = {
        var table: [String: Builtin] = [
            "int": Builtin(arity: 1...1, signature: "int(number, string or date)", parameters: [[.int, .double, .string, .time, .duration, .bool]], result: fixed(.int), body: .unary(toInt)),
            "double": Builtin(arity: 1...1, signature: "double(number, string or date)", parameters: [[.int, .double, .string, .time, .duration]], result: fixed(.double), body: .unary(toDouble)),
            "string": Builtin(arity: 1...1, signature: "string(value)", parameters: [[.null, .bool, .int, .double, .string, .time, .duration, .list, .map]], result: fixed(.string), body: .unary { value in .string(Stringify.text(value)) }),
            "bool": Builtin(arity: 1...1, signature: "bool(bool or \"true\"/\"false\")", parameters: [[.bool, .string]], result: fixed(.bool), body: .unary(toBool)),
            "round": Builtin(arity: 1...1, signature: "round(number)", parameters: [numbers], result: fixed(.int), body: .unary(round)),
            "abs": Builtin(arity: 1...1, signature: "abs(number)", parameters: [numbers + [.duration]], result: { $0.first ?? .dyn }, body: .unary(absolute)),
            "min": Builtin(arity: 1...16, signature: "min(a, b, ...) of numbers, dates or durations, or min(list)", parameters: [numbers + [.time, .duration, .list]], result: extremumType, body: .variadic { values throws(EvaluationFailure) in try extremum(values, name: "min", wantLess: true) }),
            "max": Builtin(arity: 1...16, signature: "max(a, b, ...) of numbers, dates or durations, or max(list)", parameters: [numbers + [.time, .duration, .list]], result: extremumType, body: .variadic { values throws(EvaluationFailure) in try extremum(values, name: "max", wantLess: false) }),
            "lower": Builtin(arity: 1...1, signature: "lower(string)", parameters: [[.string]], result: fixed(.string), body: .unary { value throws(EvaluationFailure) in .string(try text(value, "lower").lowercased()) }),
            "upper": Builtin(arity: 1...1, signature: "upper(string)", parameters: [[.string]], result: fixed(.string), body: .unary { value throws(EvaluationFailure) in .string(try text(value, "upper").uppercased()) }),
            "len": Builtin(arity: 1...1, signature: "len(string, list or object)", parameters: [[.string, .list, .map]], result: fixed(.int), body: .unary(length)),
            "contains": Builtin(arity: 2...2, signature: "contains(string, substring) or contains(list, value)", parameters: [[.string, .list], [.null, .bool, .int, .double, .string]], result: fixed(.bool), body: .binary(contains)),
            "starts_with": Builtin(arity: 2...2, signature: "starts_with(string, prefix)", parameters: [[.string], [.string]], result: fixed(.bool), body: .binary { a, b throws(EvaluationFailure) in .bool(try text(a, "starts_with").hasPrefix(try text(b, "starts_with"))) }),
            "ends_with": Builtin(arity: 2...2, signature: "ends_with(string, suffix)", parameters: [[.string], [.string]], result: fixed(.bool), body: .binary { a, b throws(EvaluationFailure) in .bool(try text(a, "ends_with").hasSuffix(try text(b, "ends_with"))) }),
            "now": Builtin(arity: 0...0, signature: "now()", parameters: [], result: fixed(.time), body: .nullary { context in .time(context.now) }),
            "duration": Builtin(arity: 1...1, signature: "duration(\"15m\") or duration(seconds)", parameters: [[.string, .int, .double, .duration]], result: fixed(.duration), body: .unary(toDuration)),
            "date": Builtin(arity: 1...1, signature: "date(ISO-8601 string or Unix seconds)", parameters: [[.string, .int, .double, .time]], result: fixed(.time), body: .unary(toDate)),
            "minutes_between": Builtin(arity: 2...2, signature: "minutes_between(from date, to date)", parameters: [[.time, .string, .int, .double]], result: fixed(.int), body: .binary(minutesBetween)),
            "format_duration": Builtin(arity: 1...1, signature: "format_duration(seconds or duration)", parameters: [[.int, .double, .duration]], result: fixed(.string), body: .unary(formatDurationValue)),
        ]
        table["size"] = table["len"]
        table["startsWith"] = table["starts_with"]
        table["endsWith"] = table["ends_with"]
        return table
    }()

    static func text(_ value: Value, _ function: String) throws(EvaluationFailure) -> String {
        guard case .string(let text) = value else { throw EvaluationFailure("\(function)() needs a string, got \(value.type.article)") }
        return text
    }

    static func toInt(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .int: return value
        case .double(let number), .time(let number), .duration(let number):
            guard number.isFinite, let whole = Int64(exactly: number.rounded(.towardZero)) else {
                throw EvaluationFailure("int() cannot convert \(number), it is out of range")
            }
            return .int(whole)
        case .string(let text):
            guard let whole = Int64(text.trimmingSpaces()) else { throw EvaluationFailure("int() cannot convert \(text.debugDescription)") }
            return .int(whole)
        case .bool(let flag): return .int(flag ? 1 : 0)
        default: throw EvaluationFailure("int() cannot convert \(value.type.article)")
        }
    }

    static func toDouble(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .int(let number): return .double(Double(number))
        case .double: return value
        case .time(let number), .duration(let number): return .double(number)
        case .string(let text):
            guard let number = Double(text.trimmingSpaces()), number.isFinite else {
                throw EvaluationFailure("double() cannot convert \(text.debugDescription)")
            }
            return .double(number)
        default: throw EvaluationFailure("double() cannot convert \(value.type.article)")
        }
    }

    static func toBool(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .bool: return value
        case .string("true"): return .bool(true)
        case .string("false"): return .bool(false)
        case .string(let text): throw EvaluationFailure("bool() cannot convert \(text.debugDescription), expected \"true\" or \"false\"")
        default: throw EvaluationFailure("bool() cannot convert \(value.type.article)")
        }
    }

    static func round(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .int: return value
        case .double(let number):
            guard number.isFinite, let whole = Int64(exactly: number.rounded(.toNearestOrAwayFromZero)) else {
                throw EvaluationFailure("round() cannot convert \(number), it is out of range")
            }
            return .int(whole)
        default: throw EvaluationFailure("round() needs a number, got \(value.type.article)")
        }
    }

    static func absolute(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .int(let number):
            guard number != .min else { throw EvaluationFailure("integer overflow in abs()") }
            return .int(Swift.abs(number))
        case .double(let number): return .double(Swift.abs(number))
        case .duration(let number): return .duration(Swift.abs(number))
        default: throw EvaluationFailure("abs() needs a number, got \(value.type.article)")
        }
    }

    static func extremumType(_ types: [ValueType]) -> ValueType {
        if types.count == 1 { return .dyn }
        if types.allSatisfy({ $0 == .int }) { return .int }
        if let first = types.first, types.allSatisfy({ $0 == first }) { return first }
        return .dyn
    }

    static func extremum(_ values: [Value], name: String, wantLess: Bool) throws(EvaluationFailure) -> Value {
        var candidates = values
        if values.count == 1 {
            guard case .list(let elements) = values[0] else {
                throw EvaluationFailure("\(name)() of one argument needs a list, got \(values[0].type.article)")
            }
            candidates = elements.map(Value.init)
        }
        guard var best = candidates.first else { throw EvaluationFailure("\(name)() of an empty list") }
        for candidate in candidates.dropFirst() {
            guard let order = compareValues(candidate, best), candidate.type != .bool, candidate.type != .string else {
                throw EvaluationFailure("\(name)() cannot compare \(candidate.type.article) with \(best.type.article)")
            }
            if wantLess ? order < 0 : order > 0 { best = candidate }
        }
        switch best {
        case .int, .double, .time, .duration:
            return best
        case .null, .bool, .string, .list, .map:
            throw EvaluationFailure("\(name)() needs numbers, dates or durations, got \(best.type.article)")
        }
    }

    static func length(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .string(let text): return .int(Int64(text.count))
        case .list(let elements): return .int(Int64(elements.count))
        case .map(let fields): return .int(Int64(fields.count))
        default: throw EvaluationFailure("len() needs a string, a list or an object, got \(value.type.article)")
        }
    }

    static func contains(_ haystack: Value, _ needle: Value) throws(EvaluationFailure) -> Value {
        switch (haystack, needle) {
        case (.string(let text), .string(let part)): return .bool(part.isEmpty || text.contains(part))
        case (.list(let elements), _): return .bool(elements.contains { valuesEqual(Value($0), needle) })
        default: throw EvaluationFailure("contains() cannot look for \(needle.type.article) in \(haystack.type.article)")
        }
    }

    static func toDuration(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .duration: return value
        case .int, .double:
            guard let seconds = value.number, seconds.isFinite else { throw EvaluationFailure("duration() of a number out of range") }
            return .duration(seconds)
        case .string(let text):
            guard let seconds = parseDuration(text) else {
                throw EvaluationFailure("\(text.debugDescription) is not a duration, expected e.g. \"15m\" or \"1h30m\"")
            }
            return .duration(seconds)
        default: throw EvaluationFailure("duration() cannot convert \(value.type.article)")
        }
    }

    /// Dates from ISO-8601 text or Unix seconds (up to year 9999).
    static func toDate(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .time: return value
        case .int, .double:
            guard let seconds = value.number, seconds.isFinite, (0...253_402_300_799).contains(seconds) else {
                throw EvaluationFailure("date() of \(value.preview) is out of range, expected Unix seconds between 0 and year 9999")
            }
            return .time(seconds)
        case .string(let text):
            guard let time = UnixTime(iso8601: text) else {
                throw EvaluationFailure("\(text.debugDescription) is not a date, expected ISO-8601 such as 2026-02-08T23:30:00Z")
            }
            return .time(time.seconds)
        default: throw EvaluationFailure("date() cannot convert \(value.type.article)")
        }
    }

    /// Whole minutes from `from` to `to`, rounded to the nearest minute.
    static func minutesBetween(_ from: Value, _ to: Value) throws(EvaluationFailure) -> Value {
        guard case .time(let start) = try toDate(from), case .time(let end) = try toDate(to) else {
            throw EvaluationFailure("minutes_between() needs two dates")
        }
        let minutes = ((end - start) / 60).rounded(.toNearestOrAwayFromZero)
        guard let whole = Int64(exactly: minutes) else {
            throw EvaluationFailure("minutes_between() is out of range (\(minutes) minutes)")
        }
        return .int(whole)
    }

    static func formatDurationValue(_ value: Value) throws(EvaluationFailure) -> Value {
        switch value {
        case .duration(let seconds): return .string(formatDuration(seconds))
        case .int, .double:
            guard let seconds = value.number, seconds.isFinite else { throw EvaluationFailure("format_duration() of a number out of range") }
            return .string(formatDuration(seconds))
        default: throw EvaluationFailure("format_duration() needs seconds or a duration, got \(value.type.article)")
        }
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars = scalars.dropFirst() }
        while let last = scalars.last, last.isWhitespace { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
