import ArgumentParser
import Foundation
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules

/// `livedispatch rules ...`: the rule author's tools.
struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Check, test, explain, diff and benchmark the mapping rules.",
        subcommands: [Check.self, Test.self, Explain.self, Diff.self, Schema.self, Bench.self]
    )

    static let defaultDirectory = "Config/rules"

    static func printError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func printDiagnostics(_ error: RuleSetError) {
        for diagnostic in error.diagnostics { printError(diagnostic.description) }
    }

    /// The rules of `directory`, or every problem printed and exit status 1.
    static func loadOrExit(_ directory: String) throws -> RuleSet {
        do {
            return try RuleSet.load(directory: directory)
        } catch {
            printDiagnostics(error)
            throw ExitCode(1)
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Report every problem in the rule files, with file:line:column.")

        enum Format: String, ExpressibleByArgument, CaseIterable { case text, json }

        @Argument(help: "The rules directory.") var directory: String = RulesCommand.defaultDirectory
        @Option(help: "text or json.") var format: Format = .text

        func run() throws {
            do {
                let rules = try RuleSet.load(directory: directory)
                switch format {
                case .text:
                    print("ok: \(rules.ruleNames.count) rules reading \(rules.topics.sorted().joined(separator: ", "))")
                case .json:
                    print(JSONValue.object(["ok": true, "rules": .integer(Int64(rules.ruleNames.count)), "diagnostics": []]).serializedString())
                }
            } catch {
                switch format {
                case .text:
                    for diagnostic in error.diagnostics { print(diagnostic.description) }
                    RulesCommand.printError("\(error.diagnostics.count) problem\(error.diagnostics.count == 1 ? "" : "s") found")
                case .json:
                    print(JSONValue.object(["ok": false, "diagnostics": .array(error.diagnostics.map(\.json))]).serializedString())
                }
                throw ExitCode(1)
            }
        }
    }

    struct Test: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the fixtures in DIR/tests/*.yaml against the rules.")

        @Argument(help: "The rules directory.") var directory: String = RulesCommand.defaultDirectory
        @Option(help: "The fixtures directory (default: DIR/tests).") var fixtures: String?

        func run() throws {
            let rules = try RulesCommand.loadOrExit(directory)
            let fixturesDirectory = fixtures ?? (directory as NSString).appendingPathComponent("tests")
            let files: [(name: String, text: String)]
            do {
                files = try RuleSet.readFiles(directory: fixturesDirectory)
            } catch {
                RulesCommand.printDiagnostics(error)
                throw ExitCode(1)
            }
            var passed = 0
            var failed = 0
            var broken = false
            for file in files {
                switch RuleFixtures.run(file: file.name, text: file.text, rules: rules) {
                case .failure(let error):
                    RulesCommand.printDiagnostics(error)
                    broken = true
                case .success(let results):
                    for result in results {
                        if result.passed {
                            passed += 1
                            print("PASS \(result.location): \(result.name)")
                        } else {
                            failed += 1
                            print("FAIL \(result.location): \(result.name)")
                            for line in result.differences { print("    \(line)") }
                        }
                    }
                }
            }
            print("\(passed) passed, \(failed) failed")
            if failed > 0 || broken { throw ExitCode(1) }
        }
    }

    struct Explain: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show, for every rule, whether an event matches and why, and the commands it makes.")

        @Option(help: "The topic the event came on.") var topic: String
        @Option(help: "A file holding the event's JSON value.") var event: String
        @Option(help: "The record key.") var key: String?
        @Option(help: "The rules directory.") var rules: String = RulesCommand.defaultDirectory
        @Option(help: "What now() returns: ISO-8601 or Unix seconds (default: the current time).") var now: String?

        func run() throws {
            let ruleSet = try RulesCommand.loadOrExit(rules)
            guard let data = FileManager.default.contents(atPath: event) else {
                RulesCommand.printError("cannot read the event file \(event)")
                throw ExitCode(1)
            }
            var clock = UnixTime(seconds: Date().timeIntervalSince1970)
            if let now {
                guard let parsed = UnixTime(iso8601: now) ?? Double(now).map({ UnixTime(seconds: $0) }) else {
                    RulesCommand.printError("--now \(now) is not a date (expected ISO-8601 or Unix seconds)")
                    throw ExitCode(1)
                }
                clock = parsed
            }
            let record = EventRecord(topic: topic, key: key, timestamp: clock)
            switch ruleSet.explain(record, value: Array(data), now: clock) {
            case .failure(let failure):
                print("the event cannot be evaluated: \(failure.reason)")
                throw ExitCode(1)
            case .success(let explanations):
                let reading = explanations.filter { if case .otherTopic = $0.status { false } else { true } }.count
                print("topic \(topic): \(reading) of \(explanations.count) rules read it")
                for explanation in explanations {
                    for line in explanation.lines { print(line) }
                }
            }
        }
    }

    struct Schema: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the JSON Schema of the rule file format.")

        func run() throws {
            print(RuleFileSchema.json.serializedString())
        }
    }

    struct Bench: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Measure rule evaluation throughput on one core (build with -c release).")

        @Option(help: "The rules directory.") var rules: String = RulesCommand.defaultDirectory
        @Option(help: "Events per sample kind.") var events: Int = 300_000

        func run() throws {
            let ruleSet = try RulesCommand.loadOrExit(rules)
            guard events > 0 else {
                RulesCommand.printError("--events must be positive")
                throw ExitCode(1)
            }
            _ = RuleBenchmark.run(rules: ruleSet, events: min(events, 10_000), cpuSeconds: ThreadCPUTime.seconds)
            var total = 0
            var seconds = 0.0
            var cpuSeconds = 0.0
            for measurement in RuleBenchmark.run(rules: ruleSet, events: events, cpuSeconds: ThreadCPUTime.seconds) {
                total += measurement.events
                seconds += measurement.seconds
                cpuSeconds += measurement.cpuSeconds
                print("\(measurement.name): \(measurement.events) events, \(measurement.commands) commands, \(Int(saturating: measurement.eventsPerCPUSecond)) events/s per core (CPU time), \(Int(saturating: measurement.eventsPerSecond)) events/s wall clock")
            }
            print("all: \(Int(saturating: Double(total) / cpuSeconds)) events/s per core (CPU time), \(Int(saturating: Double(total) / seconds)) events/s wall clock")
        }
    }
}
