import LiveDispatchCore
import Yams

/// A YAML node that remembers where it is, read through Yams' node API so
/// every key and value keeps its line and column.
struct YAMLNode: Sendable {
    enum ScalarStyle: Sendable, Hashable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    enum Kind: Sendable {
        case scalar(String, ScalarStyle)
        case mapping([(key: YAMLNode, value: YAMLNode)])
        case sequence([YAMLNode])
    }

    var kind: Kind
    var line: Int
    var column: Int

    var kindName: String {
        switch kind {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a list"
        }
    }

    var scalar: String? {
        if case .scalar(let text, _) = kind { return text }
        return nil
    }

    var isPlainNull: Bool {
        if case .scalar(let text, .plain) = kind { return ["", "~", "null", "Null", "NULL"].contains(text) }
        return false
    }

    /// The value as JSON, with YAML 1.2 core rules for plain scalars.
    var json: JSONValue {
        switch kind {
        case .scalar(let text, let style):
            guard style == .plain else { return .string(text) }
            if isPlainNull { return .null }
            switch text {
            case "true", "True", "TRUE": return .bool(true)
            case "false", "False", "FALSE": return .bool(false)
            default: break
            }
            if let integer = Int64(text) { return .integer(integer) }
            if text.first.map({ $0.isNumber || $0 == "-" || $0 == "+" || $0 == "." }) == true,
                let number = Double(text), number.isFinite
            {
                return .double(number)
            }
            return .string(text)
        case .mapping(let pairs):
            var fields: [String: JSONValue] = [:]
            for pair in pairs { fields[pair.key.scalar ?? pair.key.json.serializedString()] = pair.value.json }
            return .object(fields)
        case .sequence(let elements):
            return .array(elements.map(\.json))
        }
    }
}

/// The text of a YAML file and how to find a place in it.
struct YAMLSource: Sendable {
    let file: String
    let text: String
    let lines: [[Unicode.Scalar]]

    init(file: String, text: String) {
        self.file = file
        self.text = text
        var lines: [[Unicode.Scalar]] = [[]]
        for scalar in text.unicodeScalars {
            lines[lines.count - 1].append(scalar)
            if scalar == "\n" { lines.append([]) }
        }
        self.lines = lines
    }

    func location(_ node: YAMLNode) -> SourceLocation {
        SourceLocation(file: file, line: node.line, column: node.column)
    }

    func location(line: Int, column: Int) -> SourceLocation {
        SourceLocation(file: file, line: line, column: column)
    }

    /// Parses the file's first document.
    func parse() throws(RuleDiagnostic) -> YAMLNode? {
        do {
            try YAMLBudget.files.check(text)
        } catch {
            throw RuleDiagnostic(
                location: location(line: error.line, column: error.column), message: error.message,
                expected: "the values written out, or fewer aliases")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw diagnostic(for: error)
        } catch {
            throw RuleDiagnostic(location: location(line: 1, column: 1), message: "cannot read the YAML: \(error)")
        }
        guard let root else { return nil }
        return try convert(root)
    }

    private func diagnostic(for error: YamlError) -> RuleDiagnostic {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = context.map { " \($0.text)" } ?? ""
            return RuleDiagnostic(
                location: location(line: mark.line, column: mark.column), message: "invalid YAML: \(problem)\(detail)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return RuleDiagnostic(
                location: location(line: context.mark.line, column: context.mark.column),
                message: "duplicate key \(duplicates.map { "'\($0)'" }.joined(separator: ", ")) in a mapping",
                expected: "each key once")
        case .reader(let problem, _, _, _):
            return RuleDiagnostic(location: location(line: 1, column: 1), message: "invalid YAML: \(problem)")
        default:
            return RuleDiagnostic(location: location(line: 1, column: 1), message: "invalid YAML: \(error)")
        }
    }

    private func convert(_ node: Node) throws(RuleDiagnostic) -> YAMLNode {
        let line = node.mark?.line ?? 1
        let column = node.mark?.column ?? 1
        switch node {
        case .scalar(let scalar):
            let style: YAMLNode.ScalarStyle
            switch scalar.style {
            case .singleQuoted: style = .singleQuoted
            case .doubleQuoted: style = .doubleQuoted
            case .literal: style = .literal
            case .folded: style = .folded
            case .plain, .any: style = .plain
            }
            return YAMLNode(kind: .scalar(scalar.string, style), line: line, column: column)
        case .mapping(let mapping):
            var pairs: [(key: YAMLNode, value: YAMLNode)] = []
            for (key, value) in mapping { pairs.append((try convert(key), try convert(value))) }
            return YAMLNode(kind: .mapping(pairs), line: line, column: column)
        case .sequence(let sequence):
            var elements: [YAMLNode] = []
            for element in sequence { elements.append(try convert(element)) }
            return YAMLNode(kind: .sequence(elements), line: line, column: column)
        case .alias:
            throw RuleDiagnostic(location: location(line: line, column: column), message: "YAML aliases are not supported in rule files", expected: "the value written out")
        }
    }

    /// Where the scalar at `offset` (in Unicode scalars) of a scalar node's
    /// value is in the file, following the node's style: the opening quote,
    /// escapes, a block header and indentation, folded line breaks.
    func location(of node: YAMLNode, offset: Int) -> SourceLocation {
        guard case .scalar(let value, let style) = node.kind else { return location(node) }
        let valueScalars = Array(value.unicodeScalars)
        var line = node.line - 1
        var column = node.column - 1
        func current() -> Unicode.Scalar? {
            guard line < lines.count, column < lines[line].count else { return nil }
            return lines[line][column]
        }
        func advance() {
            guard line < lines.count else { return }
            column += 1
            if column >= lines[line].count, line + 1 < lines.count {
                line += 1
                column = 0
            }
        }
        switch style {
        case .singleQuoted, .doubleQuoted:
            advance()
        case .literal, .folded:
            line += 1
            column = 0
        case .plain:
            break
        }
        var consumed = 0
        var budget = 100_000
        while consumed <= offset, consumed < valueScalars.count, budget > 0 {
            budget -= 1
            guard let source = current() else { break }
            let wanted = valueScalars[consumed]
            if style == .doubleQuoted, source == "\\" {
                advance()
                let escape = current()
                let length: Int
                switch escape {
                case "x": length = 2
                case "u": length = 4
                case "U": length = 8
                case "\n":
                    advance()
                    while let next = current(), next == " " || next == "\t" { advance() }
                    continue
                default: length = 0
                }
                if consumed == offset { return location(line: line + 1, column: column) }
                for _ in 0..<(length + 1) { advance() }
                consumed += 1
                continue
            }
            if source == wanted || (wanted.properties.isWhitespace && source.properties.isWhitespace) {
                if consumed == offset { return location(line: line + 1, column: column + 1) }
                if wanted == " ", source == "\n" {
                    advance()
                    while let next = current(), next == " " || next == "\t" { advance() }
                } else {
                    advance()
                }
                consumed += 1
                continue
            }
            if source.properties.isWhitespace || (style == .singleQuoted && source == "'") {
                advance()
                continue
            }
            break
        }
        if consumed == offset, current() != nil {
            return location(line: line + 1, column: column + 1)
        }
        return location(node)
    }
}

extension YAMLNode {
    /// The pairs of a mapping, or nil.
    var pairs: [(key: YAMLNode, value: YAMLNode)]? {
        if case .mapping(let pairs) = kind { return pairs }
        return nil
    }

    var elements: [YAMLNode]? {
        if case .sequence(let elements) = kind { return elements }
        return nil
    }

    /// The value under a key of a mapping.
    subscript(key: String) -> YAMLNode? {
        pairs?.first(where: { $0.key.scalar == key })?.value
    }
}
