/// A parsed expression: its shape and where it is in the expression text
/// (offsets in Unicode scalars), so errors and explanations can point at it.
indirect enum Syntax: Sendable, Hashable {
    case literal(Value, Span)
    case name(String, Span)
    case member(Syntax, String, Span)
    case index(Syntax, Syntax, Span)
    case call(String, [Syntax], Span)
    case unary(UnaryOperator, Syntax, Span)
    case binary(BinaryOperator, Syntax, Syntax, Span)
    case conditional(Syntax, Syntax, Syntax, Span)
    case list([Syntax], Span)

    var isLiteral: Bool {
        if case .literal = self { return true }
        return false
    }

    var span: Span {
        switch self {
        case .literal(_, let span), .name(_, let span), .member(_, _, let span), .index(_, _, let span),
            .call(_, _, let span), .unary(_, _, let span), .binary(_, _, _, let span),
            .conditional(_, _, _, let span), .list(_, let span):
            span
        }
    }
}

/// Where a piece of an expression is: `start..<end` in Unicode scalars.
struct Span: Sendable, Hashable {
    var start: Int
    var end: Int

    func text(in scalars: [Unicode.Scalar]) -> String {
        let lower = Swift.max(0, Swift.min(start, scalars.count))
        let upper = Swift.max(lower, Swift.min(end, scalars.count))
        return String(String.UnicodeScalarView(scalars[lower..<upper]))
    }
}

enum UnaryOperator: String, Sendable, Hashable {
    case not = "!"
    case negate = "-"
}

enum BinaryOperator: String, Sendable, Hashable {
    case or = "||"
    case and = "&&"
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
    case `in` = "in"
    case coalesce = "??"
    case add = "+"
    case subtract = "-"
    case multiply = "*"
    case divide = "/"
    case remainder = "%"
}

/// A precedence-climbing parser. From loosest to tightest: `a ? b : c`,
/// `||`, `&&`, comparisons and `in`, `??`, `+ -`, `* / %`, unary `! -`,
/// then member access, indexing and calls (`s.contains("x")` is
/// `contains(s, "x")`).
struct ExpressionParser {
    /// Deepest nesting accepted, so that a hostile rule cannot exhaust the stack.
    static let maxDepth = 64

    /// Most terms (literals and names, including the field and function
    /// names of `.a` and `.f()`) one expression may have. Chains such as
    /// `a && b && …` or `.a.a…` build trees as deep as they are long, and
    /// evaluating walks the tree recursively: a tree has at most this many
    /// levels plus its nesting (unary operators, lists), which keeps an
    /// evaluation within a 512 KB thread stack even in a debug build (about
    /// 1 KB a level there). Compiling recurses with larger frames and runs
    /// on its own thread (see ``RuleSet/compile(files:)``).
    static let maxTerms = 256

    let tokens: [Token]
    var position = 0
    var depth = 0

    static func parse(_ text: String) throws(ExpressionError) -> Syntax {
        var lexer = Lexer(text)
        let tokens = try lexer.tokenize()
        try checkLength(tokens)
        var parser = ExpressionParser(tokens: tokens)
        if case .end = parser.current.kind {
            throw ExpressionError(message: "the expression is empty", expected: "an expression", offset: 0)
        }
        let syntax = try parser.parseConditional()
        if case .end = parser.current.kind { return syntax }
        throw ExpressionError(
            message: "unexpected \(parser.current.display)", expected: "an operator or the end of the expression",
            offset: parser.current.start)
    }

    /// Refuses an expression with more than ``maxTerms`` terms before any
    /// tree is built, pointing at the first term past the limit.
    static func checkLength(_ tokens: [Token]) throws(ExpressionError) {
        var terms = 0
        var firstBeyond: Int?
        for token in tokens {
            switch token.kind {
            case .integer, .double, .string:
                terms += 1
            case .identifier(let name):
                if name != "in" { terms += 1 }
            case .symbol, .end:
                continue
            }
            if terms > maxTerms, firstBeyond == nil { firstBeyond = token.start }
        }
        guard let firstBeyond else { return }
        throw ExpressionError(
            message: "expression too long (\(terms) terms, limit \(maxTerms))",
            expected: "a shorter expression, or a rule split in several", offset: firstBeyond)
    }

    var current: Token { tokens[position] }

    mutating func advance() -> Token {
        let token = tokens[position]
        if position < tokens.count - 1 { position += 1 }
        return token
    }

    func isSymbol(_ symbol: String) -> Bool {
        if case .symbol(let found) = current.kind { return found == symbol }
        return false
    }

    func isKeyword(_ word: String) -> Bool {
        if case .identifier(let found) = current.kind { return found == word }
        return false
    }

    mutating func expect(_ symbol: String, context: String) throws(ExpressionError) -> Token {
        guard isSymbol(symbol) else {
            throw ExpressionError(message: "unexpected \(current.display) \(context)", expected: "'\(symbol)'", offset: current.start)
        }
        return advance()
    }

    mutating func nest() throws(ExpressionError) {
        depth += 1
        if depth > Self.maxDepth {
            throw ExpressionError(message: "the expression is nested too deeply", expected: "at most \(Self.maxDepth) levels", offset: current.start)
        }
    }

    mutating func parseConditional() throws(ExpressionError) -> Syntax {
        try nest()
        defer { depth -= 1 }
        let condition = try parseBinary(level: 0)
        guard isSymbol("?") else { return condition }
        _ = advance()
        let whenTrue = try parseConditional()
        _ = try expect(":", context: "in a conditional 'a ? b : c'")
        let whenFalse = try parseConditional()
        return .conditional(condition, whenTrue, whenFalse, Span(start: condition.span.start, end: whenFalse.span.end))
    }

    static let levels: [[(String, BinaryOperator)]] = [
        [("||", .or)],
        [("&&", .and)],
        [("==", .equal), ("!=", .notEqual), ("<", .less), ("<=", .lessOrEqual), (">", .greater), (">=", .greaterOrEqual), ("in", .in)],
        [("??", .coalesce)],
        [("+", .add), ("-", .subtract)],
        [("*", .multiply), ("/", .divide), ("%", .remainder)],
    ]

    func binaryOperator(level: Int) -> BinaryOperator? {
        for (symbol, op) in Self.levels[level] {
            if symbol == "in" ? isKeyword("in") : isSymbol(symbol) { return op }
        }
        return nil
    }

    mutating func parseBinary(level: Int) throws(ExpressionError) -> Syntax {
        if level == Self.levels.count { return try parseUnary() }
        var left = try parseBinary(level: level + 1)
        if Self.levels[level].contains(where: { $0.1 == .coalesce }) {
            // Right-associative: a ?? b ?? c is a ?? (b ?? c). The operands
            // are read in a loop and folded from the right, so a long chain
            // costs no stack while parsing.
            var operands = [left]
            while binaryOperator(level: level) == .coalesce {
                _ = advance()
                operands.append(try parseBinary(level: level + 1))
            }
            var right = operands.removeLast()
            while let operand = operands.popLast() {
                right = .binary(.coalesce, operand, right, Span(start: operand.span.start, end: right.span.end))
            }
            return right
        }
        while let op = binaryOperator(level: level) {
            _ = advance()
            if level == 2, case .binary(let inner, _, _, _) = left, Self.levels[2].contains(where: { $0.1 == inner }) {
                throw ExpressionError(
                    message: "comparisons cannot be chained", expected: "'&&' between two comparisons",
                    offset: tokens[position - 1].start)
            }
            let right = try parseBinary(level: level + 1)
            left = .binary(op, left, right, Span(start: left.span.start, end: right.span.end))
        }
        return left
    }

    mutating func parseUnary() throws(ExpressionError) -> Syntax {
        if isSymbol("!") || isSymbol("-") {
            try nest()
            defer { depth -= 1 }
            let token = advance()
            let operand = try parseUnary()
            if token.kind == .symbol("-") {
                switch operand {
                case .literal(.int(let value), let span): return .literal(.int(-value), Span(start: token.start, end: span.end))
                case .literal(.double(let value), let span): return .literal(.double(-value), Span(start: token.start, end: span.end))
                default: break
                }
            }
            let op: UnaryOperator = token.kind == .symbol("!") ? .not : .negate
            return .unary(op, operand, Span(start: token.start, end: operand.span.end))
        }
        return try parsePostfix()
    }

    mutating func parsePostfix() throws(ExpressionError) -> Syntax {
        var base = try parsePrimary()
        while true {
            if isSymbol(".") {
                _ = advance()
                guard case .identifier(let field) = current.kind else {
                    throw ExpressionError(message: "unexpected \(current.display) after '.'", expected: "a field name", offset: current.start)
                }
                let fieldToken = advance()
                if isSymbol("(") {
                    let arguments = try parseArguments()
                    base = .call(field, [base] + arguments.list, Span(start: base.span.start, end: arguments.end))
                } else {
                    base = .member(base, field, Span(start: base.span.start, end: fieldToken.end))
                }
            } else if isSymbol("[") {
                try nest()
                defer { depth -= 1 }
                _ = advance()
                let subscriptExpression = try parseConditional()
                let close = try expect("]", context: "in an index")
                base = .index(base, subscriptExpression, Span(start: base.span.start, end: close.end))
            } else {
                return base
            }
        }
    }

    mutating func parseArguments() throws(ExpressionError) -> (list: [Syntax], end: Int) {
        try nest()
        defer { depth -= 1 }
        _ = advance()
        var arguments: [Syntax] = []
        if isSymbol(")") { return ([], advance().end) }
        while true {
            arguments.append(try parseConditional())
            if isSymbol(",") {
                _ = advance()
                continue
            }
            let close = try expect(")", context: "in the arguments of a call")
            return (arguments, close.end)
        }
    }

    mutating func parsePrimary() throws(ExpressionError) -> Syntax {
        let token = current
        switch token.kind {
        case .integer(let value):
            _ = advance()
            return .literal(.int(value), Span(start: token.start, end: token.end))
        case .double(let value):
            _ = advance()
            return .literal(.double(value), Span(start: token.start, end: token.end))
        case .string(let text):
            _ = advance()
            return .literal(.string(text), Span(start: token.start, end: token.end))
        case .identifier(let name):
            _ = advance()
            let span = Span(start: token.start, end: token.end)
            switch name {
            case "true": return .literal(.bool(true), span)
            case "false": return .literal(.bool(false), span)
            case "null": return .literal(.null, span)
            case "in":
                throw ExpressionError(message: "unexpected 'in'", expected: "an expression before 'in'", offset: token.start)
            default: break
            }
            if isSymbol("(") {
                let arguments = try parseArguments()
                return .call(name, arguments.list, Span(start: token.start, end: arguments.end))
            }
            return .name(name, span)
        case .symbol("("):
            try nest()
            defer { depth -= 1 }
            _ = advance()
            let inner = try parseConditional()
            _ = try expect(")", context: "in parentheses")
            return inner
        case .symbol("["):
            try nest()
            defer { depth -= 1 }
            _ = advance()
            var elements: [Syntax] = []
            if isSymbol("]") { return .list([], Span(start: token.start, end: advance().end)) }
            while true {
                elements.append(try parseConditional())
                if isSymbol(",") {
                    _ = advance()
                    continue
                }
                let close = try expect("]", context: "in a list")
                return .list(elements, Span(start: token.start, end: close.end))
            }
        case .symbol, .end:
            throw ExpressionError(message: "unexpected \(token.display)", expected: "a value, a name or '('", offset: token.start)
        }
    }
}
