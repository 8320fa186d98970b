import ArgumentParser
import Foundation
import Kafka
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker
import Logging

extension RulesCommand {
    /// `livedispatch rules diff`: the base rules and new ones evaluated on
    /// the domain records of a recent period, and what differs.
    struct Diff: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what new rules would do differently on the domain records of a recent period.",
            discussion: """
                Reads the domain topics the rules read (or --topics) from the first record at or after --since, \
                found by timestamp, to their end; without joining a consumer group or committing. Every record is \
                evaluated with the base rules and the new ones as the router evaluates it, with now() as the \
                record's time. Exits 0 when the new rules raise no error the base rules did not, 1 when they do \
                (naming the rules and events), 2 when the diff cannot run (bad arguments, unreadable rules or \
                configuration, Kafka unreachable).
                """
        )

        @Argument(help: "The directory of the new rules.") var newRules: String
        @Option(help: "The directory of the base rules (default: rules.path of the configuration).") var base: String?
        @Option(help: "The worker configuration: rules.path, limits.max_event_bytes, kafka.properties (default: Config/livedispatch.yaml).")
        var config: String?
        @Option(name: .customLong("bootstrap-servers"), help: "The Kafka brokers, host:port[,host:port…].") var bootstrapServers: String
        @Option(help: "Where to start: a duration back from now (2h, 30m) or an ISO-8601 time.") var since: String
        @Option(help: "Only these domain topics, comma-separated (default: every topic either rule set reads).") var topics: String?
        @Option(name: .customLong("limit-events"), help: "Read at most this many events, spread over every partition: each gives its share, its most recent.") var limitEvents: Int?
        @Option(help: "Activities to show, most affected first.") var limit: Int = 10
        @Flag(help: "Print the report as JSON (shape: docs/rules.md).") var json = false
        @Flag(help: "Print events/s and the peak RSS on standard error.") var stats = false

        func validate() throws {
            if limit < 0 { throw ValidationError("--limit must be 0 or more, got \(limit)") }
            if let limitEvents, limitEvents <= 0 { throw ValidationError("--limit-events must be positive, got \(limitEvents)") }
            if bootstrapServers.split(separator: ",").isEmpty { throw ValidationError("--bootstrap-servers: expected host:port[,host:port…]") }
            if Self.startTime(since, now: Date().timeIntervalSince1970) == nil {
                throw ValidationError("--since \(since.debugDescription): expected a duration (2h, 30m, 90s) or an ISO-8601 time")
            }
        }

        /// `--since` as milliseconds since the Unix epoch.
        static func startTime(_ text: String, now: Double) -> Int64? {
            if let back = parseDuration(text) { return Int64(exactly: ((now - back) * 1000).rounded(.down)) }
            guard let time = UnixTime(iso8601: text), time.isAccepted else { return nil }
            return Int64(exactly: (time.seconds * 1000).rounded(.down))
        }

        static func fail(_ message: String) -> ExitCode {
            RulesCommand.printError("error: \(message)")
            return ExitCode(2)
        }

        static func load(_ directory: String, what: String) throws -> RuleSet {
            do {
                return try RuleSet.load(directory: directory)
            } catch {
                RulesCommand.printError("error: the \(what) rules in \(directory) have problems:")
                RulesCommand.printDiagnostics(error)
                throw ExitCode(2)
            }
        }

        func run() async throws {
            let wallClock = Date().timeIntervalSince1970
            guard let start = Self.startTime(since, now: wallClock) else { throw Self.fail("--since \(since.debugDescription) is not a time") }
            let configuration: WorkerConfiguration
            let configurationPath = config ?? "Config/livedispatch.yaml"
            if config == nil, base != nil, !FileManager.default.fileExists(atPath: configurationPath) {
                configuration = WorkerConfiguration()
            } else {
                do {
                    configuration = try WorkerConfiguration.load(path: configurationPath)
                } catch {
                    throw Self.fail("the configuration \(configurationPath) is not valid:\n\(error)")
                }
            }
            let baseDirectory = base ?? configuration.rules.path
            let baseRules = try Self.load(baseDirectory, what: "base")
            let newRuleSet = try Self.load(newRules, what: "new")
            let readable = baseRules.topics.union(newRuleSet.topics)
            var chosen = readable.sorted()
            if let topics {
                chosen = topics.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                if let unread = chosen.first(where: { !readable.contains($0) }) {
                    throw Self.fail("--topics: no rule of \(baseDirectory) or \(newRules) reads \(unread) (they read \(readable.sorted().joined(separator: ", ")))")
                }
            }
            var logger = Logger(label: "livedispatch.rules-diff") { StreamLogHandler.standardError(label: $0) }
            logger.logLevel = .error
            var properties = configuration.kafka.properties
            if properties["log_level"] == nil { properties["log_level"] = "3" }
            let client = KafkaClientConfiguration(
                bootstrapServers: bootstrapServers.split(separator: ",").map(String.init), clientID: "livedispatch-rules-diff",
                properties: properties)
            let partitions: [String: Int]
            do {
                partitions = try await KafkaAdmin(configuration: client, logger: logger).partitionCounts()
            } catch {
                throw Self.fail("cannot read the topics of \(bootstrapServers): \(error)")
            }
            if let missing = chosen.first(where: { partitions[$0] == nil }) {
                throw Self.fail("the topic \(missing) does not exist on \(bootstrapServers)")
            }

            var run = RuleDiffRun(
                base: baseRules, new: newRuleSet, maxEventBytes: configuration.limits.maxEventBytes,
                limitEvents: self.limitEvents ?? Int.max, now: UnixTime(seconds: wallClock))
            let reader = KafkaPartitionReader(configuration: client, logger: logger)
            let clock = ContinuousClock()
            let began = clock.now
            var diffing = Duration.zero
            if let limitEvents {
                // A capped read takes each partition's share of the limit, its most recent events.
                let sampled = chosen.flatMap { topic in
                    (0..<Int32(clamping: partitions[topic] ?? 0)).map { TopicPartition(topic: topic, partition: $0) }
                }
                do {
                    try await reader.readSample(sampled, since: start, limit: limitEvents) { records in
                        let batchStart = clock.now
                        defer { diffing += clock.now - batchStart }
                        for record in records { run.take(record) }
                    }
                } catch {
                    throw Self.fail("cannot read \(chosen.joined(separator: ", ")) from \(bootstrapServers): \(error)")
                }
            } else {
                for topic in chosen {
                    for partition in 0..<Int32(clamping: partitions[topic] ?? 0) {
                        do {
                            try await reader.readBatchesToEnd(topic: topic, partition: partition, since: start) { records in
                                let batchStart = clock.now
                                defer { diffing += clock.now - batchStart }
                                for record in records { run.take(record) }
                            }
                        } catch {
                            throw Self.fail("cannot read \(topic)[\(partition)] from \(bootstrapServers): \(error)")
                        }
                    }
                }
            }
            let elapsed = clock.now - began
            let report = run.diff.report(limit: limit)
            if json {
                print(report.json(render: { LockScreen.render($0) }).serializedString())
            } else {
                DiffPrinter(report: report, base: baseDirectory, new: newRules, topics: chosen, since: start).print()
            }
            if stats {
                let events = Double(report.summary.eventsRead)
                let cpu = ThreadCPUTime.processSeconds()
                func rate(_ duration: Duration) -> Int { duration.seconds > 0 ? Int(saturating: events / duration.seconds) : 0 }
                RulesCommand.printError(
                    "stats: \(report.summary.eventsRead) events in \(String(format: "%.2f", elapsed.seconds)) s: \(rate(elapsed)) events/s read and diffed, "
                        + "\(rate(diffing)) events/s diffed (\(String(format: "%.2f", diffing.seconds)) s); "
                        + "\(String(format: "%.1f", cpu)) s of CPU (\(cpu > 0 ? Int(saturating: events / cpu) : 0) events per CPU second); "
                        + "peak RSS \(String(format: "%.0f", ProcessStatus.megabytes("VmHWM:", process: "self"))) MB")
            }
            if !report.newErrors.isEmpty {
                let names = report.newErrors.map { "\($0.rule.map { "rule \($0)" } ?? "unreadable events") (\($0.count) event\($0.count == 1 ? "" : "s"))" }
                RulesCommand.printError("the new rules fail where the base rules did not: \(names.joined(separator: ", "))")
                throw ExitCode(1)
            }
        }
    }

}

/// The text form of a rules diff report.
struct DiffPrinter {
    var report: RuleDiff.Report
    var base: String
    var new: String
    var topics: [String]
    var since: Int64

    func print() {
        let summary = report.summary
        let start = UnixTime(seconds: Double(since) / 1000).iso8601
        Swift.print("rules diff: \(base) → \(new) on \(topics.joined(separator: ", ")) since \(start)")
        Swift.print("events read: \(summary.eventsRead)")
        Swift.print("events whose commands differ: \(summary.eventsDiffering)")
        Swift.print("activities affected: \(summary.activitiesAffected)\(summary.activitiesAffectedIsExact ? "" : " or more")")
        Swift.print("commands added: \(summary.commandsAdded), removed: \(summary.commandsRemoved), changed: \(summary.commandsChanged)")
        Swift.print("new rule errors: \(summary.newErrors)\(summary.fixedErrors > 0 ? " (errors fixed: \(summary.fixedErrors))" : "")")
        for failures in report.newErrors {
            Swift.print("  \(failures.rule.map { "rule \($0)" } ?? "unreadable event"): \(failures.count) event\(failures.count == 1 ? "" : "s")")
            for example in failures.examples { Swift.print("    \(example.position): \(example.reason)") }
        }
        if summary.unreadableEvents > 0 {
            Swift.print("unreadable events (both rule sets fail alike): \(summary.unreadableEvents)")
            for example in report.unreadable.examples { Swift.print("    \(example.position): \(example.reason)") }
        }
        for activity in report.activities {
            Swift.print("")
            Swift.print("activity \(activity.activityID): \(activity.events) event\(activity.events == 1 ? "" : "s"), \(activity.added) added, \(activity.removed) removed, \(activity.changed) changed")
            for change in activity.examples {
                let rules = change.baseRule == change.newRule
                    ? (change.newRule ?? "")
                    : "\(change.baseRule ?? "none") → \(change.newRule ?? "none")"
                Swift.print("  \(change.position) \(change.kind.rawValue) (rule \(rules))")
                for field in change.fields { Swift.print("    \(field)") }
                let before = LockScreen.render(change.stateBefore)
                let after = LockScreen.render(change.stateAfter)
                if before == after {
                    Swift.print("    lock screen (unchanged): \(before)")
                } else {
                    Swift.print("    lock screen before: \(before)")
                    Swift.print("    lock screen after:  \(after)")
                }
            }
            let shown = activity.examples.count
            let total = activity.added + activity.removed + activity.changed
            if total > shown { Swift.print("  … \(total - shown) more change\(total - shown == 1 ? "" : "s") not shown") }
        }
        let hidden = summary.activitiesAffected - report.activities.count
        if hidden > 0 { Swift.print("\n… \(hidden) more activit\(hidden == 1 ? "y" : "ies") affected (--limit)") }
    }
}
