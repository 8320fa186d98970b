import LiveDispatchCore

/// A value while an expression is evaluated. Event fields come in as
/// ``JSONValue`` and stay shared (lists and maps hold JSON without copying);
/// times and durations exist only inside expressions.
enum Value: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    /// A point in time, as Unix seconds.
    case time(Double)
    /// A length of time, in seconds.
    case duration(Double)
    case list([JSONValue])
    case map([String: JSONValue])

    init(_ json: JSONValue) {
        switch json {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .integer(let value): self = .int(value)
        case .double(let value): self = .double(value)
        case .string(let text): self = .string(text)
        case .array(let elements): self = .list(elements)
        case .object(let fields): self = .map(fields)
        }
    }

    /// The JSON form: times become Unix seconds, durations seconds.
    var json: JSONValue {
        switch self {
        case .null: .null
        case .bool(let flag): .bool(flag)
        case .int(let value): .integer(value)
        case .double(let value): .double(value)
        case .string(let text): .string(text)
        case .time(let seconds): .double(seconds)
        case .duration(let seconds): .double(seconds)
        case .list(let elements): .array(elements)
        case .map(let fields): .object(fields)
        }
    }

    var type: ValueType {
        switch self {
        case .null: .null
        case .bool: .bool
        case .int: .int
        case .double: .double
        case .string: .string
        case .time: .time
        case .duration: .duration
        case .list: .list
        case .map: .map
        }
    }

    var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    /// A short rendering for explanations and error messages.
    var preview: String {
        let text: String
        switch self {
        case .time(let seconds): text = "date(\(UnixTime(seconds: seconds).iso8601.debugDescription))"
        case .duration(let seconds): text = "duration(\(formatDuration(seconds).debugDescription))"
        default: text = json.serializedString()
        }
        if text.count > 80 { return String(text.prefix(77)) + "..." }
        return text
    }
}

/// The type of an expression, as far as it is known before evaluation.
/// `dyn` is anything read from an event: checked when the event arrives.
enum ValueType: String, Sendable, Hashable {
    case dyn
    case null
    case bool
    case int
    case double
    case string
    case time = "date"
    case duration
    case list
    case map

    var name: String { rawValue }

    var isNumeric: Bool { self == .int || self == .double }

    /// Whether a value of this type may turn out to be `other` at run time.
    func admits(_ other: ValueType) -> Bool { self == .dyn || self == other }
}

/// Why evaluating an expression failed for one event: a type error, a
/// value out of range, a bad conversion. Never a crash.
struct EvaluationFailure: Error, Sendable, Hashable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// Renders seconds as `1h 05m`, `12m 30s` or `45s`.
func formatDuration(_ seconds: Double) -> String {
    guard seconds.isFinite else { return "\(seconds)" }
    let sign = seconds < 0 ? "-" : ""
    let total = Int64(abs(seconds).rounded(.down).clamped(to: 0...9.0e15))
    let days = total / 86_400
    let hours = total / 3600 % 24
    let minutes = total / 60 % 60
    let secs = total % 60
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    if days > 0 { return "\(sign)\(days)d \(two(hours))h" }
    if hours > 0 { return "\(sign)\(hours)h \(two(minutes))m" }
    if minutes > 0 { return "\(sign)\(minutes)m \(two(secs))s" }
    return "\(sign)\(secs)s"
}

extension Double {
    func clamped(to range: ClosedRange<Double>) -> Double { Swift.min(Swift.max(self, range.lowerBound), range.upperBound) }
}

/// Parses a duration such as `15m`, `1h30m`, `90s`, `1.5h`, `250ms`, `2d`.
func parseDuration(_ text: String) -> Double? {
    let scalars = Array(text.unicodeScalars.filter { $0 != " " })
    guard !scalars.isEmpty else { return nil }
    var index = 0
    var total = 0.0
    var negative = false
    if scalars[0] == "-" { negative = true; index = 1 }
    var sawComponent = false
    while index < scalars.count {
        let numberStart = index
        while index < scalars.count, scalars[index].properties.numericType != nil || scalars[index] == "." {
            guard scalars[index].isASCII else { return nil }
            index += 1
        }
        guard index > numberStart, let amount = Double(String(String.UnicodeScalarView(scalars[numberStart..<index]))) else {
            return nil
        }
        let unitStart = index
        while index < scalars.count, scalars[index].properties.isAlphabetic { index += 1 }
        let unit = String(String.UnicodeScalarView(scalars[unitStart..<index]))
        let scale: Double
        switch unit {
        case "ms": scale = 0.001
        case "s": scale = 1
        case "m": scale = 60
        case "h": scale = 3600
        case "d": scale = 86_400
        default: return nil
        }
        total += amount * scale
        sawComponent = true
    }
    guard sawComponent, total.isFinite else { return nil }
    return negative ? -total : total
}

extension ValueType {
    /// The type name with its article, for messages: "an int", "a string", "null".
    var article: String {
        switch self {
        case .null: "null"
        case .int: "an int"
        default: "a \(rawValue)"
        }
    }
}
