/// A JSON value as LiveDispatch reads and writes it.
///
/// Integers and fractional numbers are kept apart so that a `content-state`
/// field written as `2` goes back on the wire as `2`, never `2.0`, and rule
/// schemas can tell `int` from `double`. Objects are unordered; the
/// serializer writes their keys sorted so the same value always gives the
/// same bytes.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    /// The name of the value's JSON type, as used in error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .integer: "int"
        case .double: "double"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let fields) = self { return fields }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    /// The value as a `Double` when it is a number of either kind.
    public var numberValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .double(let value): value
        case .null, .bool, .string, .array, .object: nil
        }
    }

    /// The value as an `Int64` when it is an integer, or a double with no
    /// fractional part that fits.
    public var integerValue: Int64? {
        switch self {
        case .integer(let value):
            return value
        case .double(let value):
            guard value.rounded(.towardZero) == value, let exact = Int64(exactly: value) else { return nil }
            return exact
        case .null, .bool, .string, .array, .object:
            return nil
        }
    }

    /// Member access on objects; `nil` for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text of the value.
    public var description: String { serializedString() }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !array.isAtEnd {
                elements.append(try array.decode(JSONValue.self))
            }
            self = .array(elements)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var fields: [String: JSONValue] = [:]
            for key in object.allKeys {
                fields[key.stringValue] = try object.decode(JSONValue.self, forKey: key)
            }
            self = .object(fields)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? single.decode(Int64.self) {
            self = .integer(integer)
        } else if let number = try? single.decode(Double.self) {
            self = .double(number)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let flag):
            var single = encoder.singleValueContainer()
            try single.encode(flag)
        case .integer(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .double(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .string(let text):
            var single = encoder.singleValueContainer()
            try single.encode(text)
        case .array(let elements):
            var array = encoder.unkeyedContainer()
            for element in elements { try array.encode(element) }
        case .object(let fields):
            var object = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in fields { try object.encode(value, forKey: AnyCodingKey(key)) }
        }
    }
}

/// A coding key for arbitrary object members.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
