import Foundation
import Testing

/// `livedispatch-bench json` as a process, briefly: the demo's documents
/// through the three parsers, their rates and ratios.
@Suite("livedispatch-bench json")
struct BenchJSONCommandTests {
    @Test func parsesTheDemosDocumentsWithEachParser() throws {
        let result = try runBench(["json", "--passes", "3", "--rounds", "2"], currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let corpus = try #require(lines.first { $0.hasPrefix("corpus: ") }, "\(result.standardOutput)")
        for kind in ["domain events", "routed commands", "tokens records", "command files", "sample events"] {
            #expect(corpus.contains(" \(kind)"), "\(corpus)")
        }
        for round in 1...2 {
            let line = try #require(lines.first { $0.hasPrefix("round \(round): ") }, "\(result.standardOutput)")
            for parser in ["JSONValue.parse", "JSONSerialization", "JSONDecoder"] {
                #expect(line.contains(" \(parser) ") && line.contains(" MB/s "), "\(line)")
            }
        }
        for parser in ["JSONSerialization", "JSONDecoder"] {
            let prefix = "JSONValue.parse / \(parser): "
            let line = try #require(lines.first { $0.hasPrefix(prefix) }, "\(result.standardOutput)")
            let ratio = try #require(Double(line.dropFirst(prefix.count).prefix { $0 != " " }), "\(line)")
            #expect(ratio > 0, "\(line)")
        }
        #expect(lines.contains { $0.hasPrefix("load average: ") }, "\(result.standardOutput)")
    }

    @Test func refusesAnExamplesPathThatIsNotThere() throws {
        let result = try runBench(["json", "--examples", "/nonexistent/examples"], currentDirectory: TestPaths.repositoryRoot)
        #expect(result.status != 0)
        #expect(result.standardError.contains("--examples: /nonexistent/examples: no such file or directory"), "\(result.standardError)")
    }
}
