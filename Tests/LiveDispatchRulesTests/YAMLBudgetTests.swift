import Foundation
import LiveDispatchCore
import Testing

@testable import LiveDispatchRules

/// Nine levels of ten aliases to the level below: 10⁹ nodes from 600 bytes.
let aliasBomb: String = {
    var lines = ["version: 1", "a: &a [" + Array(repeating: "\"lol\"", count: 10).joined(separator: ", ") + "]"]
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
    for (previous, name) in zip(names, names.dropFirst()) {
        lines.append("\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]")
    }
    lines.append("rules: [*i]")
    return lines.joined(separator: "\n") + "\n"
}()

/// The process's peak resident size, in bytes.
func peakResidentBytes() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss * 1024
}

@Suite("YAML budget")
struct YAMLBudgetTests {
    @Test("an alias bomb is refused fast, at the alias that goes over, without growing")
    func aliasBombRefused() throws {
        let before = peakResidentBytes()
        let start = ContinuousClock.now
        let error = try #require(throws: RuleSetError.self) { try RuleSet.compile(files: [("bomb.yaml", aliasBomb)]) }
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(peakResidentBytes() - before < 64 << 20)
        let diagnostic = try #require(error.diagnostics.first)
        #expect(error.diagnostics.count == 1)
        // Levels a to e expand to 11, 111, …, 111,111 nodes (123,465 with the keys);
        // the first *e of level f goes over 200,000.
        #expect(diagnostic.location.line == 7)
        #expect(diagnostic.location.column == 8)
        #expect(diagnostic.message == "the YAML expands to more than 200000 nodes (aliases included)")
    }

    @Test("many aliases and deep nesting are refused with their position")
    func aliasesAndDepth() throws {
        let many = "a: &a 1\nb: [" + Array(repeating: "*a", count: 1_001).joined(separator: ",") + "]\n"
        let manyError = try #require(throws: YAMLBudget.Exceeded.self) { try YAMLBudget.files.check(many) }
        #expect(manyError == YAMLBudget.Exceeded(line: 2, column: 5 + 1_000 * 3, message: "the YAML has more than 1000 aliases"))

        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        let deepError = try #require(throws: YAMLBudget.Exceeded.self) { try YAMLBudget.files.check(deep) }
        #expect(deepError == YAMLBudget.Exceeded(line: 1, column: 65, message: "the YAML is nested deeper than 64 levels"))
    }

    @Test("a few small aliases, and text libyaml cannot parse, pass the budget")
    func withinBudget() throws {
        try YAMLBudget.files.check("base: &base {a: 1, b: [1, 2]}\nx: *base\ny: *base\n")
        try YAMLBudget.files.check("a: [unclosed\n")
        try YAMLBudget.files.check(followersRules)
    }

    @Test("a reload meeting an alias bomb keeps the rules in force")
    func reloadKeepsRules() throws {
        let directory = try RulePaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try followersRules.write(to: directory.appendingPathComponent("fans.yaml"), atomically: true, encoding: .utf8)
        let store = try RuleSetStore(directory: directory.path)
        try aliasBomb.write(to: directory.appendingPathComponent("bomb.yaml"), atomically: true, encoding: .utf8)
        guard case .failure(let error) = store.reload(from: directory.path) else {
            Issue.record("an alias bomb was accepted")
            return
        }
        #expect(error.diagnostics.map(\.location.line) == [7])
        #expect(store.current.ruleNames == ["fan-out"])
        #expect(store.generation == 1)
    }
}
