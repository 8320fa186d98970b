import ArgumentParser
import Foundation
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchDemo
import LiveDispatchRules

/// `livedispatch-bench json`: LiveDispatch's JSON parser beside Foundation's
/// two, over the documents the demo's records make, on one thread.
struct BenchJSONCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "json",
        abstract: "Parse the demo's JSON documents with JSONValue.parse, JSONSerialization and JSONDecoder; print MB/s and ns per document.",
        discussion: """
            The corpus: every record value of the scenarios in --examples (domain events, token registrations, commands; \
            times resolved), the commands the rules in --rules make of their domain events, the command files in \
            --commands, and the rules benchmark's sample events. Each round parses the corpus --passes times with each \
            parser in turn (JSONValue.parse; JSONSerialization.jsonObject; JSONDecoder into JSONValue's Codable \
            conformance), timed by the thread's CPU clock, and prints the three rates. The summary gives each parser's \
            median over the rounds and the ratios of LiveDispatch's parser to each of Foundation's.
            """
    )

    @Option(help: "Scenario files (*.jsonl), a directory or one file.") var examples = "Config/examples"
    @Option(help: "The rules directory whose commands join the corpus.") var rules = "Config/rules"
    @Option(help: "A directory of command documents (*.json); skipped when absent.") var commands = "Fuzz/corpus/command"
    @Option(help: "Parses of the whole corpus per parser and round.") var passes = 2_000
    @Option(help: "Rounds, each parser once per round.") var rounds = 3

    func validate() throws {
        guard passes >= 1 else { throw ValidationError("--passes must be at least 1") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
    }

    func run() throws {
        let corpus = try Self.corpus(examples: examples, rules: rules, commands: commands)
        let bytes = corpus.map(\.bytes.count).reduce(0, +)
        print("corpus: \(corpus.count) documents, \(bytes) bytes (\(Self.kinds(corpus)))")
        try Self.check(corpus)

        let parsers = JSONParserUnderTest.allCases
        var figures: [JSONParserUnderTest: [JSONFigure]] = [:]
        for round in 1...rounds {
            var line = "round \(round):"
            for parser in parsers {
                let figure = parser.measure(corpus, passes: passes)
                figures[parser, default: []].append(figure)
                line += String(format: " %@ %.1f MB/s %.0f ns/doc;", parser.label, figure.megabytesPerSecond, figure.nanosecondsPerDocument)
            }
            print(String(line.dropLast()))
        }
        // Each parser saw as many top-level members: the same work was timed.
        let members = Set(figures.values.joined().map { $0.members / max(1, $0.documents / corpus.count) })
        guard members.count == 1 else { throw BenchError(description: "the parsers read different trees (top-level members per pass: \(members.sorted()))") }
        let medians = parsers.map { parser in (parser, JSONFigure.median(figures[parser] ?? [])) }
        for (parser, median) in medians {
            print(String(format: "%@: %.1f MB/s, %.0f ns per document (median of %d rounds)", parser.label, median.megabytesPerSecond, median.nanosecondsPerDocument, rounds))
        }
        let ours = JSONFigure.median(figures[.liveDispatch] ?? [])
        for parser in parsers where parser != .liveDispatch {
            let theirs = JSONFigure.median(figures[parser] ?? [])
            let each = zip(figures[.liveDispatch] ?? [], figures[parser] ?? []).map { String(format: "%.2f", $0.megabytesPerSecond / max($1.megabytesPerSecond, 1e-9)) }
            print(String(format: "JSONValue.parse / %@: %.2f", parser.label, ours.megabytesPerSecond / max(theirs.megabytesPerSecond, 1e-9)) + " (rounds: \(each.joined(separator: " ")))")
        }
        print("load average: \(LoadAverage.current())")
    }

    /// "42 domain events, 12 commands, …", in the corpus's order of kinds.
    static func kinds(_ corpus: [JSONDocument]) -> String {
        var order: [String] = []
        var counts: [String: Int] = [:]
        for document in corpus {
            if counts[document.kind] == nil { order.append(document.kind) }
            counts[document.kind, default: 0] += 1
        }
        return order.map { "\(counts[$0] ?? 0) \($0)" }.joined(separator: ", ")
    }

    /// The documents the demo's records make, each with its origin.
    static func corpus(examples: String, rules rulesDirectory: String, commands: String) throws -> [JSONDocument] {
        let scenario: Scenario
        do { scenario = try Scenario.load(path: examples) } catch { throw BenchError(description: "--examples: \(error)") }
        let rules: RuleSet
        do { rules = try RuleSet.load(directory: rulesDirectory) } catch { throw BenchError(description: "--rules \(rulesDirectory): \(error)") }
        let now = UnixTime(seconds: 1_770_577_200)
        var corpus: [JSONDocument] = []
        var routed: [JSONDocument] = []
        for (offset, step) in scenario.steps.enumerated() {
            let value = step.renderedValue(now: now)
            switch step.destination {
            case .domain(let topic):
                corpus.append(JSONDocument(kind: "domain events", origin: step.source, bytes: value))
                let record = EventRecord(topic: topic, offset: Int64(offset), key: step.key, timestamp: now)
                for case .command(let command) in rules.evaluate(record, value: value, now: now) {
                    routed.append(JSONDocument(kind: "routed commands", origin: "\(step.source) through \(rulesDirectory)", bytes: command.serialized()))
                }
            case .internalTopic(let topic):
                corpus.append(JSONDocument(kind: "\(topic.rawValue) records", origin: step.source, bytes: value))
            }
        }
        corpus += routed
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: commands, isDirectory: &isDirectory), isDirectory.boolValue {
            let names = try FileManager.default.contentsOfDirectory(atPath: commands).filter { $0.hasSuffix(".json") }.sorted()
            for name in names {
                let path = (commands as NSString).appendingPathComponent(name)
                guard let data = FileManager.default.contents(atPath: path) else { throw BenchError(description: "--commands: \(path) cannot be read") }
                corpus.append(JSONDocument(kind: "command files", origin: path, bytes: Array(data)))
            }
        }
        for sample in RuleBenchmark.sampleEvents() {
            for (index, value) in sample.values.enumerated() {
                corpus.append(JSONDocument(kind: "sample events", origin: "\(sample.name) #\(index)", bytes: value))
            }
        }
        guard !routed.isEmpty else { throw BenchError(description: "the rules in \(rulesDirectory) made no command of the events in \(examples)") }
        return corpus
    }

    /// Every parser reads every document, before anything is timed: a
    /// parser that refused one would be timed on less work.
    static func check(_ corpus: [JSONDocument]) throws {
        for document in corpus {
            do {
                _ = try JSONValue.parse(document.bytes)
                _ = try JSONSerialization.jsonObject(with: document.data, options: [.fragmentsAllowed])
                _ = try JSONDecoder().decode(JSONValue.self, from: document.data)
            } catch {
                throw BenchError(description: "\(document.origin): not read by every parser: \(error)")
            }
        }
    }
}

/// One document of the corpus, in the form each parser takes.
struct JSONDocument {
    var kind: String
    var origin: String
    var bytes: [UInt8]
    var data: Data

    init(kind: String, origin: String, bytes: [UInt8]) {
        self.kind = kind
        self.origin = origin
        self.bytes = bytes
        self.data = Data(bytes)
    }
}

/// One parser's time over the corpus.
struct JSONFigure {
    var documents: Int
    var bytes: Int
    var cpuSeconds: Double
    /// Top-level members of every result, summed.
    var members: Int

    var megabytesPerSecond: Double { Double(bytes) / 1e6 / max(cpuSeconds, 1e-9) }
    var nanosecondsPerDocument: Double { cpuSeconds * 1e9 / Double(max(documents, 1)) }

    /// The round of median rate.
    static func median(_ figures: [JSONFigure]) -> JSONFigure {
        let sorted = figures.sorted { $0.megabytesPerSecond < $1.megabytesPerSecond }
        guard !sorted.isEmpty else { return JSONFigure(documents: 0, bytes: 0, cpuSeconds: 0, members: 0) }
        return sorted[(sorted.count - 1) / 2]
    }
}

/// The three ways of reading a JSON document into a tree.
enum JSONParserUnderTest: CaseIterable, Hashable {
    /// ``JSONValue/parse(_:limits:)``: exact numbers, duplicate keys refused, errors with positions.
    case liveDispatch
    /// `JSONSerialization.jsonObject(with:)`: `[String: Any]` and `NSNumber`s.
    case serialization
    /// `JSONDecoder().decode(JSONValue.self, from:)`: the Codable way to the same tree.
    case decoder

    var label: String {
        switch self {
        case .liveDispatch: "JSONValue.parse"
        case .serialization: "JSONSerialization"
        case .decoder: "JSONDecoder"
        }
    }

    /// Parses the corpus `passes` times on the calling thread. Each
    /// result's top-level members are counted, so no parse can be left out
    /// and the parsers' trees can be compared.
    func measure(_ corpus: [JSONDocument], passes: Int) -> JSONFigure {
        var members = 0
        let decoder = JSONDecoder()
        let start = ThreadCPUTime.seconds()
        for _ in 0..<passes {
            for document in corpus {
                switch self {
                case .liveDispatch:
                    members &+= (try? JSONValue.parse(document.bytes))?.objectValue?.count ?? 0
                case .serialization:
                    members &+= ((try? JSONSerialization.jsonObject(with: document.data, options: [.fragmentsAllowed])) as? [String: Any])?.count ?? 0
                case .decoder:
                    members &+= (try? decoder.decode(JSONValue.self, from: document.data))?.objectValue?.count ?? 0
                }
            }
        }
        let cpuSeconds = ThreadCPUTime.seconds() - start
        let bytes = corpus.map(\.bytes.count).reduce(0, +)
        return JSONFigure(documents: corpus.count * passes, bytes: bytes * passes, cpuSeconds: cpuSeconds, members: members)
    }
}
