/// The title or body of an alert: text shown as it is, or a key of the
/// app's localized strings (`Localizable.strings`) with the arguments the
/// device formats it with, so each device shows its own language.
///
/// In a command it is a string or `{"loc_key": "GOAL", "loc_args": ["Ada"]}`;
/// on the wire to APNs the localized form is `{"loc-key": …, "loc-args": […]}`.
public enum AlertText: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    case text(String)
    case localized(key: String, arguments: [String])

    /// Most arguments a localized text takes.
    public static let maxArguments = 16

    public init(stringLiteral value: String) { self = .text(value) }

    /// The text, or the key with its arguments (`GOAL(Ada, 2)`), as logs,
    /// the console and diffs show it.
    public var description: String {
        switch self {
        case .text(let text): text
        case .localized(let key, let arguments): arguments.isEmpty ? key : "\(key)(\(arguments.joined(separator: ", ")))"
        }
    }

    public var json: JSONValue {
        switch self {
        case .text(let text): .string(text)
        case .localized(let key, let arguments):
            arguments.isEmpty
                ? .object(["loc_key": .string(key)])
                : .object(["loc_key": .string(key), "loc_args": .array(arguments.map(JSONValue.string))])
        }
    }

    /// Appends ``json``'s bytes (`wire`: the APNs spelling, `loc-key` and
    /// `loc-args`), keys in the serializer's order.
    func write(to output: inout [UInt8], wire: Bool) {
        switch self {
        case .text(let text):
            JSONValue.writeString(text, to: &output)
        case .localized(let key, let arguments):
            var writer = JSONObjectWriter(continuing: &output)
            let write: (String, inout [UInt8]) -> Void = { JSONValue.writeString($0, to: &$1) }
            if wire {
                if !arguments.isEmpty { writer.array("loc-args", arguments, write) }
                writer.string("loc-key", key)
            } else {
                if !arguments.isEmpty { writer.array("loc_args", arguments, write) }
                writer.string("loc_key", key)
            }
            output = writer.finish()
        }
    }

    static let fieldNames: Set<String> = ["loc_key", "loc_args"]

    init(json: JSONValue, path: String) throws(FieldError) {
        if let text = json.stringValue {
            self = .text(text)
            return
        }
        guard case .object = json else {
            throw FieldError(field: path, message: "expected text or {\"loc_key\": …, \"loc_args\": […]}, got \(json.typeName)")
        }
        let reader = try FieldReader(json, path: path, what: "a localized text")
        try reader.rejectUnknown(Self.fieldNames)
        let key = try reader.requiredString("loc_key")
        guard !key.isEmpty else { throw FieldError(field: reader.name("loc_key"), message: "must not be empty") }
        let elements = try reader.array("loc_args")
        guard elements.count <= Self.maxArguments else {
            throw FieldError(field: reader.name("loc_args"), message: "has \(elements.count) arguments; at most \(Self.maxArguments)")
        }
        var arguments: [String] = []
        for (index, element) in elements.enumerated() {
            guard let argument = element.stringValue else {
                throw FieldError(field: "\(reader.name("loc_args"))[\(index)]", message: "expected a string, got \(element.typeName)")
            }
            arguments.append(argument)
        }
        self = .localized(key: key, arguments: arguments)
    }
}
