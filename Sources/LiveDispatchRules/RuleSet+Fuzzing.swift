import LiveDispatchCore

@_spi(Fuzzing)
extension RuleSet {
    /// Compiles `text` as an expression and as a template (with `item` and
    /// `index` in scope), evaluates what compiles on `event` and explains a
    /// false condition: every walk an expression tree gets, for the fuzz
    /// targets. Returns whether the expression compiled.
    @discardableResult
    public static func fuzzExpression(_ text: String, event: JSONValue) -> Bool {
        let compiler = ExpressionCompiler(hasItem: true)
        var context = EvaluationContext(
            event: event, key: .string("k"), topic: "t", headers: ["h": "v"], now: 1_770_593_400, recordTime: 1_770_593_000)
        context.item = Value(event)
        if let template = try? Template.compile(text, compiler: compiler) {
            _ = try? template.render(context, field: "fuzz")
        }
        guard let compiled = try? compiler.compile(text) else { return false }
        _ = try? compiled.evaluate(context)
        _ = whyFalse(compiled.syntax, scalars: Array(text.unicodeScalars), context: context)
        return true
    }
}
