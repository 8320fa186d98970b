import LiveDispatchCore

/// A place in a rule file: 1-based line and column (columns count Unicode
/// scalars, as YAML does).
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    public var description: String { "\(file):\(line):\(column)" }

    public static func < (lhs: SourceLocation, rhs: SourceLocation) -> Bool {
        (lhs.file, lhs.line, lhs.column) < (rhs.file, rhs.line, rhs.column)
    }
}

/// One problem in a rule file, printed as
/// `file:line:column: rule NAME: what is wrong (what was expected)`.
public struct RuleDiagnostic: Error, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var location: SourceLocation
    /// The rule the problem is in, when it is in one.
    public var rule: String?
    /// What is wrong.
    public var message: String
    /// What was expected instead, when that can be said.
    public var expected: String?

    public init(location: SourceLocation, rule: String? = nil, message: String, expected: String? = nil) {
        self.location = location
        self.rule = rule
        self.message = message
        self.expected = expected
    }

    public var description: String {
        var text = "\(location): "
        if let rule { text += "rule \(rule): " }
        text += message
        if let expected { text += " (expected \(expected))" }
        return text
    }

    /// The diagnostic for `rules check --format json`.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "file": .string(location.file), "line": .integer(Int64(location.line)),
            "column": .integer(Int64(location.column)), "message": .string(message),
        ]
        if let rule { fields["rule"] = .string(rule) }
        if let expected { fields["expected"] = .string(expected) }
        return .object(fields)
    }

    public static func < (lhs: RuleDiagnostic, rhs: RuleDiagnostic) -> Bool {
        if lhs.location != rhs.location { return lhs.location < rhs.location }
        return lhs.message < rhs.message
    }
}

/// Why a rule directory could not become a ``RuleSet``: every problem found,
/// each with its position. The current rule set stays in force.
public struct RuleSetError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: String, Sendable, Hashable {
            case unreadable
            case invalid
        }

        private let kind: Kind

        /// The directory or a file in it could not be read.
        public static let unreadable = Code(kind: .unreadable)
        /// The files were read and have problems.
        public static let invalid = Code(kind: .invalid)

        public var description: String { kind.rawValue }
    }

    public var code: Code
    public var diagnostics: [RuleDiagnostic]

    public init(code: Code, diagnostics: [RuleDiagnostic]) {
        self.code = code
        self.diagnostics = diagnostics
    }

    public var description: String {
        let count = diagnostics.count
        let head = "the rules have \(count) problem\(count == 1 ? "" : "s"); fix them and run `livedispatch rules check`"
        return ([head] + diagnostics.map(\.description)).joined(separator: "\n")
    }
}
