import LiveDispatchCore

/// A token of the expression language, with its offset (in Unicode
/// scalars) inside the expression text.
struct Token: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case integer(Int64)
        case double(Double)
        case string(String)
        case identifier(String)
        case symbol(String)
        case end
    }

    var kind: Kind
    var start: Int
    var end: Int

    var display: String {
        switch kind {
        case .integer(let value): "'\(value)'"
        case .double(let value): "'\(value)'"
        case .string(let text): "string \(text.debugDescription)"
        case .identifier(let name): "'\(name)'"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "end of the expression"
        }
    }
}

/// A problem in an expression's text, at an offset inside it.
struct ExpressionError: Error, Sendable, Hashable {
    var message: String
    var expected: String?
    var offset: Int
}

/// Splits an expression into tokens. CEL's lexical rules where they overlap:
/// single or double quoted strings with backslash escapes, decimal numbers,
/// `&&`, `||`, `==`, and `??` for a default.
struct Lexer {
    let scalars: [Unicode.Scalar]
    var index = 0

    init(_ text: String) { scalars = Array(text.unicodeScalars) }

    static let symbols: [String] = ["??", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",", "(", ")", "[", "]"]

    mutating func tokenize() throws(ExpressionError) -> [Token] {
        var tokens: [Token] = []
        while true {
            let token = try next()
            tokens.append(token)
            if case .end = token.kind { return tokens }
        }
    }

    mutating func next() throws(ExpressionError) -> Token {
        while index < scalars.count, scalars[index].properties.isWhitespace { index += 1 }
        let start = index
        guard index < scalars.count else { return Token(kind: .end, start: start, end: start) }
        let scalar = scalars[index]
        if scalar == "\"" || scalar == "'" { return try string(quote: scalar) }
        if isDigit(scalar) { return try number() }
        if scalar == "_" || (scalar.isASCII && scalar.properties.isAlphabetic) {
            while index < scalars.count, scalars[index] == "_" || (scalars[index].isASCII && (scalars[index].properties.isAlphabetic || isDigit(scalars[index]))) {
                index += 1
            }
            return Token(kind: .identifier(String(String.UnicodeScalarView(scalars[start..<index]))), start: start, end: index)
        }
        for symbol in Self.symbols {
            let symbolScalars = Array(symbol.unicodeScalars)
            if index + symbolScalars.count <= scalars.count, Array(scalars[index..<index + symbolScalars.count]) == symbolScalars {
                index += symbolScalars.count
                return Token(kind: .symbol(symbol), start: start, end: index)
            }
        }
        if scalar == "=" {
            throw ExpressionError(message: "unexpected '='", expected: "'==' to compare", offset: start)
        }
        if scalar == "&" || scalar == "|" {
            throw ExpressionError(message: "unexpected '\(scalar)'", expected: "'\(scalar)\(scalar)'", offset: start)
        }
        if scalar == "{" {
            throw ExpressionError(message: "unexpected '{'", expected: "an expression; templates with {{ }} are only allowed in activity_id and alert", offset: start)
        }
        throw ExpressionError(message: "unexpected character '\(scalar.escaped(asASCII: false))'", expected: "an operator, a name, a number or a string", offset: start)
    }

    private func isDigit(_ scalar: Unicode.Scalar) -> Bool { scalar >= "0" && scalar <= "9" }

    private mutating func number() throws(ExpressionError) -> Token {
        let start = index
        var isDouble = false
        while index < scalars.count, isDigit(scalars[index]) { index += 1 }
        if index + 1 < scalars.count, scalars[index] == ".", isDigit(scalars[index + 1]) {
            isDouble = true
            index += 1
            while index < scalars.count, isDigit(scalars[index]) { index += 1 }
        }
        if index < scalars.count, scalars[index] == "e" || scalars[index] == "E" {
            isDouble = true
            index += 1
            if index < scalars.count, scalars[index] == "+" || scalars[index] == "-" { index += 1 }
            guard index < scalars.count, isDigit(scalars[index]) else {
                throw ExpressionError(message: "malformed number", expected: "digits after the exponent", offset: start)
            }
            while index < scalars.count, isDigit(scalars[index]) { index += 1 }
        }
        if index < scalars.count, scalars[index].properties.isAlphabetic {
            throw ExpressionError(message: "malformed number", expected: "a space or an operator after a number; write durations as duration(\"15m\")", offset: start)
        }
        let text = String(String.UnicodeScalarView(scalars[start..<index]))
        if !isDouble, let value = Int64(text) { return Token(kind: .integer(value), start: start, end: index) }
        if !isDouble {
            throw ExpressionError(message: "integer \(text) is out of range", expected: "a value between \(Int64.min) and \(Int64.max)", offset: start)
        }
        guard let value = Double(text), value.isFinite else {
            throw ExpressionError(message: "number \(text) is out of range", expected: "a finite number", offset: start)
        }
        // The JSON parser's rule: a number a double would round is refused, never rounded.
        if case .failure(let error) = Result(catching: { () throws(JSONParseError) in try JSONValue.parse(text) }), error.isInexactNumber {
            throw ExpressionError(
                message: "number \(text) would be rounded by a 64-bit double", expected: "at most 15 significant digits", offset: start)
        }
        return Token(kind: .double(value), start: start, end: index)
    }

    private mutating func string(quote: Unicode.Scalar) throws(ExpressionError) -> Token {
        let start = index
        index += 1
        var text = String.UnicodeScalarView()
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == quote {
                index += 1
                return Token(kind: .string(String(text)), start: start, end: index)
            }
            if scalar == "\\" {
                guard index + 1 < scalars.count else { break }
                let escape = scalars[index + 1]
                switch escape {
                case "n": text.append("\n")
                case "t": text.append("\t")
                case "r": text.append("\r")
                case "\\", "\"", "'": text.append(escape)
                default:
                    throw ExpressionError(message: "unknown escape '\\\(escape)' in a string", expected: "\\n, \\t, \\r, \\\\, \\\" or \\'", offset: index)
                }
                index += 2
                continue
            }
            text.append(scalar)
            index += 1
        }
        throw ExpressionError(message: "unterminated string", expected: "a closing \(quote)", offset: start)
    }
}
