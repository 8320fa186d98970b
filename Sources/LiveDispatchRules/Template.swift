import LiveDispatchCore

/// A string with `{{ expression }}` parts, compiled once.
struct Template: Sendable {
    enum Part: Sendable {
        case text(String)
        case expression(CompiledExpression)
    }

    var parts: [Part]
    var source: String

    /// A problem in a template, at an offset of its text.
    struct Problem: Error {
        var message: String
        var expected: String?
        var offset: Int
    }

    static func compile(_ text: String, compiler: ExpressionCompiler) throws(Problem) -> Template {
        let scalars = Array(text.unicodeScalars)
        var parts: [Part] = []
        var literal = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            if scalars[index] == "{", index + 1 < scalars.count, scalars[index + 1] == "{" {
                let open = index
                var close = index + 2
                while close + 1 < scalars.count, !(scalars[close] == "}" && scalars[close + 1] == "}") { close += 1 }
                guard close + 1 < scalars.count else {
                    throw Problem(message: "'{{' is not closed", expected: "'}}' after the expression", offset: open)
                }
                let inner = String(String.UnicodeScalarView(scalars[(open + 2)..<close]))
                if inner.trimmingSpaces().isEmpty {
                    throw Problem(message: "empty '{{ }}' in a template", expected: "an expression between '{{' and '}}'", offset: open)
                }
                do {
                    let compiled = try compiler.compile(inner)
                    if !literal.isEmpty {
                        parts.append(.text(String(literal)))
                        literal = String.UnicodeScalarView()
                    }
                    parts.append(.expression(compiled))
                } catch {
                    throw Problem(message: error.message, expected: error.expected, offset: open + 2 + error.offset)
                }
                index = close + 2
            } else if scalars[index] == "}", index + 1 < scalars.count, scalars[index + 1] == "}" {
                throw Problem(message: "'}}' without a matching '{{'", expected: "'{{ expression }}'", offset: index)
            } else {
                literal.append(scalars[index])
                index += 1
            }
        }
        if !literal.isEmpty { parts.append(.text(String(literal))) }
        return Template(parts: parts, source: text)
    }

    /// The constant text, when the template has no expression.
    var constant: String? {
        if parts.isEmpty { return "" }
        if parts.count == 1, case .text(let text) = parts[0] { return text }
        return nil
    }

    func render(_ context: EvaluationContext, field: String) throws(EvaluationFailure) -> String {
        if parts.count == 1, case .text(let text) = parts[0] { return text }
        var output = ""
        output.reserveCapacity(source.utf8.count + 16)
        for part in parts {
            switch part {
            case .text(let text): output += text
            case .expression(let expression):
                let value: Value
                do {
                    value = try expression.evaluate(context)
                } catch {
                    throw EvaluationFailure("\(field): {{ \(expression.text.trimmingSpaces()) }}: \(error.message)")
                }
                if case .null = value {
                    throw EvaluationFailure("\(field): {{ \(expression.text.trimmingSpaces()) }} is null (give a default with ??)")
                }
                output += Stringify.text(value)
            }
            if output.utf8.count > Builtins.maxStringBytes {
                throw EvaluationFailure("\(field): longer than \(Builtins.maxStringBytes) bytes")
            }
        }
        return output
    }
}
