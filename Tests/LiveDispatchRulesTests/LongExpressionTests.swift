import Foundation
import LiveDispatchCore
import Synchronization
import Testing

@testable import LiveDispatchRules

/// Expression chains as long as the limit allows, and longer: the shapes that
/// build trees as deep as they are long.
enum LongChain: String, CaseIterable, Sendable {
    case sum, and, coalesce, member, index, method

    /// An expression of exactly `terms` terms (names and literals), with a
    /// tree about as deep.
    func text(terms: Int) -> String {
        switch self {
        case .sum: "event.n" + String(repeating: " + 1", count: terms - 2)
        case .and: Array(repeating: "event.a", count: terms / 2).joined(separator: " && ")
        case .coalesce: Array(repeating: "event.none", count: terms / 2).joined(separator: " ?? ")
        case .member: "event" + String(repeating: ".x", count: terms - 1)
        case .index: "event.none" + String(repeating: "[0]", count: terms - 2)
        case .method: "event.s" + String(repeating: ".lower()", count: terms - 2)
        }
    }

    static let event: JSONValue = ["n": 1, "a": true, "s": "ABC"]
}

/// Runs `body` on a thread with a 512 KB stack, the size secondary threads
/// get, and waits for it with a deadline.
/// A result handed from the small-stack thread to the waiting test.
final class ResultBox<T: Sendable>: Sendable {
    let value = Mutex<T?>(nil)
    init() {}
}

func onSmallStack<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T? {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let result = body()
        box.value.withLock { $0 = result }
        done.signal()
    }
    thread.stackSize = 512 * 1024
    thread.start()
    guard done.wait(timeout: .now() + 120) == .success else { return nil }
    return box.value.withLock { $0 }
}

func longRuleFile(when expression: String) -> String {
    """
    version: 1
    activity_types:
      Match:
        content_state:
          score: int
    rules:
      - name: long
        topic: t
        when: \(expression)
        activity_id: "x"
        activity_type: Match
        set:
          score: 1
    """
}

@Suite("Long expression chains")
struct LongExpressionTests {
    @Test("a chain past the limit is refused while parsing, at the first term too many", arguments: LongChain.allCases)
    func refused(shape: LongChain) throws {
        let terms = 2 * ExpressionParser.maxTerms
        let problem = try #require(compileProblem(shape.text(terms: terms)))
        #expect(problem.message == "expression too long (\(terms) terms, limit \(ExpressionParser.maxTerms))")
    }

    @Test("10,000 terms of 1+1+… are refused with the count and the offset of the first term too many")
    func tenThousand() throws {
        let text = Array(repeating: "1", count: 10_000).joined(separator: "+")
        let problem = try #require(compileProblem(text))
        #expect(problem.message == "expression too long (10000 terms, limit \(ExpressionParser.maxTerms))")
        #expect(problem.offset == 2 * ExpressionParser.maxTerms)
    }

    @Test("the loader reports a long chain as file:line:column and a reload keeps the old rules")
    func loaderAndReload() throws {
        for shape in LongChain.allCases {
            let error = try #require(throws: RuleSetError.self) {
                try RuleSet.compile(files: [("long.yaml", longRuleFile(when: shape.text(terms: 2_000)))])
            }
            let diagnostic = try #require(error.diagnostics.first)
            #expect(error.diagnostics.count == 1)
            #expect(diagnostic.location.file == "long.yaml")
            #expect(diagnostic.location.line == 9)
            #expect(diagnostic.location.column > 11)
            #expect(diagnostic.description.contains("rule long: when: expression too long (2000 terms, limit \(ExpressionParser.maxTerms))"), "\(diagnostic)")
        }

        let directory = try RulePaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("fans.yaml")
        try followersRules.write(to: file, atomically: true, encoding: .utf8)
        let store = try RuleSetStore(directory: directory.path)
        try longRuleFile(when: LongChain.sum.text(terms: 10_000)).write(to: file, atomically: true, encoding: .utf8)
        guard case .failure(let error) = store.reload(from: directory.path) else {
            Issue.record("a rule with 10,000 terms was accepted")
            return
        }
        #expect(error.diagnostics.map(\.message) == ["when: expression too long (10000 terms, limit \(ExpressionParser.maxTerms))"])
        #expect(store.current.ruleNames == ["fan-out"])
        #expect(store.generation == 1)
    }

    @Test("a chain at the limit evaluates on a 512 KB stack, and explains", arguments: LongChain.allCases)
    func atTheLimit(shape: LongChain) throws {
        let text = shape.text(terms: ExpressionParser.maxTerms)
        let compiled = try ExpressionCompiler(hasItem: false).compile(text)
        let context = EvaluationContext(event: LongChain.event, key: .null, topic: "t", headers: [:], now: 0, recordTime: 0)
        let outcome = onSmallStack { () -> String in
            do {
                return "\(try compiled.evaluate(context).type)"
            } catch {
                return "error: \(error)"
            }
        }
        let expected: [LongChain: String] = [.sum: "int", .and: "bool", .coalesce: "null", .member: "null", .index: "null", .method: "string"]
        #expect(outcome == expected[shape])
        #expect(RuleSet.whyFalse(compiled.syntax, scalars: Array(text.unicodeScalars), context: context).count == 1)
    }

    @Test("rules with chains at the limit load from a thread with a 512 KB stack, and match")
    func ruleAtTheLimit() throws {
        let files = LongChain.allCases.map { shape in
            let text = longRuleFile(when: "true")
                .replacingOccurrences(of: "name: long", with: "name: \(shape)")
                .replacingOccurrences(of: "Match", with: "Match\(shape)")
                .replacingOccurrences(of: #"activity_id: "x""#, with: #"activity_id: "x-{{ \#(shape.text(terms: ExpressionParser.maxTerms)) }}""#)
            return ("\(shape).yaml", text)
        }
        let loaded = onSmallStack { () -> String? in
            do {
                _ = try RuleSet.compile(files: files)
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(loaded == .some(nil))
        let rules = try RuleSet.compile(files: [("long.yaml", longRuleFile(when: LongChain.and.text(terms: ExpressionParser.maxTerms)))])
        let outcomes = rules.evaluate(
            EventRecord(topic: "t", timestamp: UnixTime(seconds: 1_770_593_000)), event: LongChain.event,
            now: UnixTime(seconds: 1_770_593_400))
        guard case .command = outcomes.first, outcomes.count == 1 else {
            Issue.record("expected one command, got \(outcomes)")
            return
        }
    }
}

@Suite("Event size")
struct EventSizeTests {
    @Test("the configured event size is the JSON parser's limit: no cap of its own below it")
    func oneLimit() throws {
        let rules = try RuleSet.compile(files: [("fans.yaml", followersRules)])
        let padding = String(repeating: "p", count: 700_000)
        let value = Array(#"{"type": "goal", "home": 1, "away": 0, "followers": ["a"], "at": "2026-02-08T23:30:00Z", "padding": "\#(padding)"}"#.utf8)
        let record = EventRecord(topic: "sports.scores", timestamp: UnixTime(seconds: 1_770_593_000))
        let accepted = rules.evaluate(record, value: value, now: now)
        guard case .command = accepted.first else {
            Issue.record("a 700 KB event under the default 1 MiB limit was refused: \(accepted)")
            return
        }
        let larger = rules.evaluate(record, value: value, now: now, eventLimits: RuleSet.eventLimits(maxBytes: 2 << 20))
        guard case .command = larger.first else {
            Issue.record("a 700 KB event under a 2 MiB limit was refused: \(larger)")
            return
        }
        let smaller = rules.evaluate(record, value: value, now: now, eventLimits: RuleSet.eventLimits(maxBytes: 512 * 1024))
        guard case .failure(let failure) = smaller.first else {
            Issue.record("a 700 KB event over a 512 KB limit was accepted")
            return
        }
        #expect(failure.code == .invalidEvent)
        #expect(failure.reason.contains("more than the limit of 524288"))
    }
}
