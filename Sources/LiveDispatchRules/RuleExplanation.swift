import LiveDispatchCore

/// What one rule made of one event, and why: for `rules explain`.
public struct RuleExplanation: Sendable, Hashable {
    public enum Status: Sendable, Hashable {
        /// The rule does not read the record's topic.
        case otherTopic([String])
        /// `when` was false; the reasons name the parts that were false.
        case notMatched([String])
        /// `when` held (or there is none) and these commands were made.
        case matched([ActivityCommand])
        /// `when` held but a field could not be computed.
        case failed(RuleFailure)
    }

    public var rule: String
    public var status: Status

    /// Lines of text for a person.
    public var lines: [String] {
        switch status {
        case .otherTopic(let topics):
            return ["rule \(rule): skipped, reads \(topics.joined(separator: ", "))"]
        case .notMatched(let reasons):
            return ["rule \(rule): not matched"] + reasons.map { "  because \($0)" }
        case .matched(let commands):
            return ["rule \(rule): matched, \(commands.count) command\(commands.count == 1 ? "" : "s")"]
                + commands.map { "  \($0.json.serializedString())" }
        case .failed(let failure):
            return ["rule \(rule): failed: \(failure.reason)"]
        }
    }
}

extension RuleSet {
    /// Runs every rule on the event and says, for each, whether it matched
    /// and why not (which part of `when` was false), with the commands made.
    public func explain(_ record: EventRecord, value: [UInt8], now: UnixTime) -> Result<[RuleExplanation], RuleFailure> {
        let event: JSONValue
        do {
            event = try Self.parseEvent(value)
        } catch {
            return .failure(error)
        }
        let context = EvaluationContext(
            event: event, key: record.key.map(Value.string) ?? .null, topic: record.topic, headers: record.headers,
            now: now.seconds, recordTime: record.timestamp.seconds)
        var explanations: [RuleExplanation] = []
        for rule in rules {
            guard rule.topics.contains(record.topic) else {
                explanations.append(RuleExplanation(rule: rule.name, status: .otherTopic(rule.topics)))
                continue
            }
            switch rule.run(context, record: record) {
            case .matched(let commands):
                explanations.append(RuleExplanation(rule: rule.name, status: .matched(commands)))
            case .failed(let failure):
                explanations.append(RuleExplanation(rule: rule.name, status: .failed(failure)))
            case .notMatched:
                var reasons: [String] = []
                if let when = rule.when {
                    let scalars = Array(when.text.unicodeScalars)
                    if case .bool(false) = (try? when.evaluate(context)) ?? .null {
                        reasons = Self.whyFalse(when.syntax, scalars: scalars, context: context)
                    }
                }
                if reasons.isEmpty, let forEach = rule.forEach {
                    reasons = ["for_each `\(forEach.text.trimmingSpaces())` gave no element"]
                }
                explanations.append(RuleExplanation(rule: rule.name, status: .notMatched(reasons)))
            }
        }
        return .success(explanations)
    }

    static func evaluate(_ syntax: Syntax, _ context: EvaluationContext) -> Result<Value, EvaluationFailure> {
        do {
            let (evaluate, _) = try ExpressionCompiler(hasItem: false).compile(syntax)
            return .success(try evaluate(context))
        } catch let failure as EvaluationFailure {
            return .failure(failure)
        } catch {
            return .failure(EvaluationFailure("\(error)"))
        }
    }

    /// The smallest parts of a false condition that made it false.
    static func whyFalse(_ syntax: Syntax, scalars: [Unicode.Scalar], context: EvaluationContext) -> [String] {
        let text = "`\(syntax.span.text(in: scalars))`"
        switch syntax {
        case .binary(.and, let left, let right, _):
            if case .success(.bool(false)) = evaluate(left, context) {
                return whyFalse(left, scalars: scalars, context: context)
            }
            return whyFalse(right, scalars: scalars, context: context)
        case .binary(.or, let left, let right, _):
            return whyFalse(left, scalars: scalars, context: context) + whyFalse(right, scalars: scalars, context: context)
        case .unary(.not, let operand, _):
            return ["\(text) was false: `\(operand.span.text(in: scalars))` was true"]
        case .binary(let op, let left, let right, _) where [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual, .in].contains(op):
            var parts: [String] = []
            for side in [left, right] {
                if case .literal = side { continue }
                switch evaluate(side, context) {
                case .success(let value): parts.append("`\(side.span.text(in: scalars))` is \(value.preview)")
                case .failure(let failure): parts.append("`\(side.span.text(in: scalars))` failed: \(failure.message)")
                }
            }
            return ["\(text) was false" + (parts.isEmpty ? "" : " (\(parts.joined(separator: ", ")))")]
        default:
            return ["\(text) was false"]
        }
    }
}
