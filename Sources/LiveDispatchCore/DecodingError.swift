/// Why a JSON document could not be read as one of LiveDispatch's values:
/// the field (a dotted path such as `alert.title`) and what was wrong.
public struct FieldError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Dotted path of the offending field; empty for the document itself.
    public var field: String
    /// What was wrong and what was expected.
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String {
        field.isEmpty ? message : "field '\(field)': \(message)"
    }
}

/// Reads typed fields out of a JSON object, turning every problem into a
/// ``FieldError`` that names the field.
struct FieldReader {
    let fields: [String: JSONValue]
    let path: String

    init(_ value: JSONValue, path: String = "", what: String) throws(FieldError) {
        guard case .object(let fields) = value else {
            throw FieldError(field: path, message: "expected \(what) as a JSON object, got \(value.typeName)")
        }
        self.fields = fields
        self.path = path
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The value of `key`, or nil when it is missing or `null`.
    func optional(_ key: String) -> JSONValue? {
        guard let value = fields[key], !value.isNull else { return nil }
        return value
    }

    func required(_ key: String) throws(FieldError) -> JSONValue {
        guard let value = optional(key) else { throw FieldError(field: name(key), message: "is required") }
        return value
    }

    func mismatch(_ key: String, expected: String, got value: JSONValue) -> FieldError {
        FieldError(field: name(key), message: "expected \(expected), got \(value.typeName)")
    }

    func string(_ key: String) throws(FieldError) -> String? {
        guard let value = optional(key) else { return nil }
        guard let text = value.stringValue else { throw mismatch(key, expected: "a string", got: value) }
        return text
    }

    func requiredString(_ key: String) throws(FieldError) -> String {
        let value = try required(key)
        guard let text = value.stringValue else { throw mismatch(key, expected: "a string", got: value) }
        return text
    }

    func bool(_ key: String) throws(FieldError) -> Bool? {
        guard let value = optional(key) else { return nil }
        guard let flag = value.boolValue else { throw mismatch(key, expected: "true or false", got: value) }
        return flag
    }

    func number(_ key: String) throws(FieldError) -> Double? {
        guard let value = optional(key) else { return nil }
        guard let number = value.numberValue else { throw mismatch(key, expected: "a number", got: value) }
        return number
    }

    func integer(_ key: String) throws(FieldError) -> Int64? {
        guard let value = optional(key) else { return nil }
        guard let integer = value.integerValue else { throw mismatch(key, expected: "an integer", got: value) }
        return integer
    }

    func object(_ key: String) throws(FieldError) -> JSONValue? {
        guard let value = optional(key) else { return nil }
        guard case .object = value else { throw mismatch(key, expected: "an object", got: value) }
        return value
    }

    /// The elements of an array, empty when the key is missing or `null`.
    func array(_ key: String) throws(FieldError) -> [JSONValue] {
        guard let value = optional(key) else { return [] }
        guard case .array(let elements) = value else { throw mismatch(key, expected: "an array", got: value) }
        return elements
    }

    /// A date given as Unix seconds (integer or fractional) or as an
    /// ISO-8601 string (`2025-11-24T18:00:00Z`, fractions and offsets allowed).
    func date(_ key: String) throws(FieldError) -> UnixTime? {
        guard let value = optional(key) else { return nil }
        switch value {
        case .integer, .double:
            guard let seconds = value.numberValue, let time = UnixTime(acceptedSeconds: seconds) else {
                throw FieldError(field: name(key), message: "expected a date as Unix seconds from 0 to 253402300799 (year 9999), got \(value.numberValue.map { "\($0)" } ?? "a number out of range")")
            }
            return time
        case .string(let text):
            guard let time = UnixTime(iso8601: text) else {
                throw FieldError(
                    field: name(key),
                    message: "\(String(text.prefix(64)).debugDescription) is not a date (expected Unix seconds or ISO-8601 such as 2025-11-24T18:00:00Z)")
            }
            guard time.isAccepted else {
                throw FieldError(field: name(key), message: "\(String(text.prefix(64)).debugDescription) is before 1970-01-01T00:00:00Z")
            }
            return time
        case .null, .bool, .array, .object:
            throw mismatch(key, expected: "a date (Unix seconds or an ISO-8601 string)", got: value)
        }
    }

    /// Refuses members that are not in `known`, naming the first unknown one.
    func rejectUnknown(_ known: Set<String>) throws(FieldError) {
        // Sorted only when one is unknown (the first in order is named): no sort per valid record.
        guard fields.keys.contains(where: { !known.contains($0) }) else { return }
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw FieldError(field: name(unknown), message: "is not a known field (known: \(known.sorted().joined(separator: ", ")))")
        }
    }
}

extension FieldReader {
    func requiredActivityID(_ key: String) throws(FieldError) -> ActivityID {
        let text = try requiredString(key)
        do {
            return try ActivityID(text)
        } catch {
            throw FieldError(field: name(key), message: error.message)
        }
    }

    func activityID(_ key: String) throws(FieldError) -> ActivityID? {
        guard optional(key) != nil else { return nil }
        return try requiredActivityID(key)
    }

    func requiredAudience(_ key: String) throws(FieldError) -> AudienceKey {
        let text = try requiredString(key)
        do {
            return try AudienceKey(text)
        } catch {
            throw FieldError(field: name(key), message: error.message)
        }
    }

    func requiredToken(_ key: String) throws(FieldError) -> DeviceToken {
        let text = try requiredString(key)
        do {
            return try DeviceToken(hex: text)
        } catch {
            throw FieldError(field: name(key), message: error.message)
        }
    }

    func token(_ key: String) throws(FieldError) -> DeviceToken? {
        guard optional(key) != nil else { return nil }
        return try requiredToken(key)
    }

    /// Parses record bytes as JSON, reporting a parse failure as a field
    /// error on the document, and a number that cannot be carried exactly
    /// as one on its field.
    static func parse(_ bytes: [UInt8]) throws(FieldError) -> JSONValue {
        do {
            return try JSONValue.parse(bytes)
        } catch where error.isInexactNumber {
            throw FieldError(field: error.field, message: "\(error.message) (line \(error.line), column \(error.column))")
        } catch {
            throw FieldError(field: "", message: "not JSON: \(error)")
        }
    }
}
