import Foundation
import Kafka
import LiveDispatchCore
import Logging
import Testing

/// `livedispatch rules diff` run as a process against a cluster holding the
/// demo's domain events: librdkafka's mock cluster and Tansu.
@Suite("livedispatch rules diff as a process", .serialized)
struct RulesDiffCommandTests {
    static let shippedRules = TestPaths.repositoryRoot.appendingPathComponent("Config/rules")

    /// The goal rule's alert title, and a new one.
    static let goalTitle = (#"title: "Goal for {{ event.scoring_team }}!""#, #"title: "GOAL! {{ event.scoring_team }}""#)
    /// The goal rule's home score, and one that fails on goals from the 60th minute on.
    static let failingGoal = (
        "teamOneScore: event.score.home\n      teamTwoScore: event.score.away\n      minute:",
        "teamOneScore: 'event.minute < 60 ? event.score.home : event.score.extra'\n      teamTwoScore: event.score.away\n      minute:")

    /// The domain records of the demo's scenarios (`Config/examples`), in
    /// file order, with `${now}`, `${now+12m}` resolved against now.
    static func demoEvents() throws -> [(topic: String, key: String, json: String)] {
        let directory = TestPaths.repositoryRoot.appendingPathComponent("Config/examples")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".jsonl") }.sorted()
        let now = Date().timeIntervalSince1970
        var events: [(topic: String, key: String, json: String)] = []
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("{") {
                let step = try JSONValue.parse(String(line))
                guard let topic = step["topic"]?.stringValue, let key = step["key"]?.stringValue, let value = step["value"] else { continue }
                let json = value.serializedString().replacing(/\$\{now(?:([+-])(\d+)m)?\}/) { match in
                    let minutes = Double(match.output.2.map { String($0) } ?? "0") ?? 0
                    return UnixTime(seconds: now + (match.output.1 == "-" ? -minutes : minutes) * 60).iso8601
                }
                events.append((topic, key, json))
            }
        }
        return events
    }

    /// A copy of the shipped rule files with `target` replaced in `sports.yaml`.
    static func changedRules(_ change: (target: String, replacement: String)) throws -> URL {
        let directory = try TestPaths.temporaryDirectory("rules-diff")
        for name in try FileManager.default.contentsOfDirectory(atPath: shippedRules.path) where name.hasSuffix(".yaml") {
            var text = try String(contentsOf: shippedRules.appendingPathComponent(name), encoding: .utf8)
            if name == "sports.yaml" {
                #expect(text.contains(change.target), "sports.yaml no longer has \(change.target)")
                text = text.replacingOccurrences(of: change.target, with: change.replacement)
            }
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return directory
    }

    /// Runs both of the issue's checks against the demo's events in the cluster at `bootstrap`.
    static func checkDemoDiffs(bootstrap: String, events: Int, environment: [String: String] = [:]) throws {
        let arguments = ["--base", shippedRules.path, "--bootstrap-servers", bootstrap, "--since", "15m"]
        let alert = try changedRules(goalTitle)
        defer { try? FileManager.default.removeItem(at: alert) }
        let json = try runProcess(["rules", "diff", alert.path] + arguments + ["--json"], environment: environment)
        #expect(json.status == 0, "\(json.standardError)")
        let report = try JSONValue.parse(json.standardOutput)
        let summary = try #require(report["summary"])
        #expect(summary["events_read"] == .integer(Int64(events)))
        #expect(summary["events_differing"] == .integer(6), "the demo's six goals")
        #expect(summary["commands_changed"] == .integer(6))
        #expect(summary["commands_added"] == .integer(0) && summary["commands_removed"] == .integer(0))
        #expect(summary["new_errors"] == .integer(0) && summary["activities_affected"] == .integer(1))
        let activities = report["activities"]?.arrayValue ?? []
        #expect(activities.map { $0["activity_id"] } == [.string("match-superb-owl-2026")])
        let examples = activities.first?["examples"]?.arrayValue ?? []
        #expect(examples.count == 3)
        for example in examples {
            #expect(example["fields"]?.arrayValue?.map { $0["path"] } == [.string("alert.title")])
            #expect(example["base_rule"] == .string("goal-scored") && example["kind"] == .string("changed"))
        }
        #expect(examples.first?["fields"]?.arrayValue?.first?["before"] == .string("Goal for Owls!"))
        #expect(examples.first?["fields"]?.arrayValue?.first?["after"] == .string("GOAL! Owls"))
        #expect(examples.first?["lock_screen"]?["after"]?.stringValue?.hasPrefix("Owls 1 – 0 Hawks") == true)

        let text = try runProcess(["rules", "diff", alert.path] + arguments, environment: environment)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("events whose commands differ: 6\n"))
        #expect(text.standardOutput.contains(#"alert.title: "Goal for Owls!" → "GOAL! Owls""#))
        #expect(text.standardOutput.contains("lock screen (unchanged): Owls 1 – 0 Hawks"))

        let failing = try changedRules(failingGoal)
        defer { try? FileManager.default.removeItem(at: failing) }
        let failed = try runProcess(["rules", "diff", failing.path] + arguments, environment: environment)
        #expect(failed.status == 1, "\(failed.standardOutput)\(failed.standardError)")
        #expect(failed.standardError.contains("the new rules fail where the base rules did not: rule goal-scored (4 events)"), "\(failed.standardError)")
        #expect(failed.standardOutput.contains("new rule errors: 4\n"))
        #expect(failed.standardOutput.contains("  rule goal-scored: 4 events\n"))
        #expect(failed.standardOutput.contains(#/    sports\.scores\[\d\]@\d+: set\.teamOneScore/#))
    }

    @Test("against the embedded cluster: an alert change shows only the goals' activity; a failing rule exits 1 naming it")
    func embeddedCluster() async throws {
        let kafka = try BackgroundProcess(["kafka", "embedded", "--brokers", "1", "--topic", "sports.scores:4", "--topic", "delivery.orders:4"])
        let line = try await kafka.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("bootstrap: ") }
        let bootstrap = String(line.dropFirst("bootstrap: ".count))
        var logger = Logger(label: "rules-diff-test")
        logger.logLevel = .error
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), linger: .milliseconds(1)),
            logger: logger)
        let events = try Self.demoEvents()
        var pending: [KafkaPendingDelivery] = []
        for event in events {
            pending.append(try producer.enqueue(topic: event.topic, key: Array(event.key.utf8), value: Array(event.json.utf8)))
        }
        // One record that is not JSON: reported, never a crash.
        pending.append(try producer.enqueue(topic: "sports.scores", key: nil, value: Array("not json".utf8)))
        for delivery in pending { _ = try await delivery.wait() }
        try Self.checkDemoDiffs(bootstrap: bootstrap, events: events.count + 1)

        // --limit-events stops the read; --topics narrows it to topics no change touches.
        let alert = try Self.changedRules(Self.goalTitle)
        defer { try? FileManager.default.removeItem(at: alert) }
        let common = ["rules", "diff", alert.path, "--base", Self.shippedRules.path, "--bootstrap-servers", bootstrap, "--since", "15m", "--json"]
        let limited = try runProcess(common + ["--limit-events", "3"])
        #expect(limited.status == 0, "\(limited.standardError)")
        #expect(try JSONValue.parse(limited.standardOutput)["summary"]?["events_read"] == .integer(3))
        let deliveries = try runProcess(common + ["--topics", "delivery.orders"])
        #expect(deliveries.status == 0, "\(deliveries.standardError)")
        let summary = try JSONValue.parse(deliveries.standardOutput)["summary"]
        #expect(summary?["events_read"] == .integer(Int64(events.filter { $0.topic == "delivery.orders" }.count)))
        #expect(summary?["events_differing"] == .integer(0))

        // Bad arguments and unreadable rules say what and where.
        let missing = try runProcess(["rules", "diff", "/nonexistent/rules", "--base", Self.shippedRules.path, "--bootstrap-servers", bootstrap, "--since", "1h"])
        #expect(missing.status == 2)
        #expect(missing.standardError.contains("the new rules in /nonexistent/rules have problems"))
        #expect(missing.standardError.contains("cannot read the rules directory"))
        let badSince = try runProcess(["rules", "diff", Self.shippedRules.path, "--bootstrap-servers", bootstrap, "--since", "yesterday"])
        #expect(badSince.status != 0)
        #expect(badSince.standardError.contains("--since \"yesterday\""))
        let unread = try runProcess(["rules", "diff", Self.shippedRules.path, "--base", Self.shippedRules.path, "--bootstrap-servers", bootstrap, "--since", "1h", "--topics", "nobody.reads"])
        #expect(unread.status == 2)
        #expect(unread.standardError.contains("reads nobody.reads"))
        #expect(try await kafka.stop() == 0)
    }

    @Test("against Tansu: an alert change shows only the goals' activity; a failing rule exits 1 naming it")
    func tansu() async throws {
        let stack = try await RealBrokerStack()
        let events = try Self.demoEvents()
        for topic in Set(events.map(\.topic)) {
            try stack.produce(topic, events.filter { $0.topic == topic }.map { ($0.key, $0.json) })
        }
        try Self.checkDemoDiffs(bootstrap: stack.bootstrap, events: events.count, environment: stack.environment)
    }
}
