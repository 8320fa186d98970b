import ArgumentParser
import Foundation
import Kafka
import LiveDispatchCore
import Logging

/// `livedispatch-bench rules-diff`: publishes match and delivery events to
/// a cluster, then runs `rules diff` over them as a process and prints its
/// throughput and peak RSS.
struct BenchRulesDiffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules-diff",
        abstract: "Publish domain events, then time `rules diff` over them (events/s, peak RSS).",
        discussion: """
            Publishes --events events to sports.scores and delivery.orders (created with --partitions when \
            missing): goals and period changes of --matches matches, order updates of as many orders, and one \
            record in 10,000 that is not JSON. Then runs `livedispatch rules diff` (built beside this executable) with the \
            goal rule's alert title changed in a copy of --rules, over the events published (or, with \
            --skip-publish, over the last --since), and prints its summary and stats lines.
            """
    )

    @Option(name: .customLong("bootstrap-servers"), help: "The Kafka brokers, host:port[,host:port…].") var bootstrapServers: String
    @Option(help: "Events to publish.") var events = 1_000_000
    @Option(help: "Matches (and orders) the events belong to.") var matches = 5_000
    @Option(help: "Partitions of the topics when they are created.") var partitions = 4
    @Option(help: "The base rules directory.") var rules = "Config/rules"
    @Flag(name: .customLong("skip-publish"), help: "Diff what the topics already hold (since --since).") var skipPublish = false
    @Option(help: "With --skip-publish: how far back to read.") var since = "1d"

    static let goalTitle = (#"title: "Goal for {{ event.scoring_team }}!""#, #"title: "GOAL! {{ event.scoring_team }}""#)

    func validate() throws {
        if events <= 0 || matches <= 0 || partitions <= 0 { throw ValidationError("--events, --matches and --partitions must be positive") }
    }

    /// The `index`th event: seven in ten on sports.scores, the rest on delivery.orders.
    static func event(_ index: Int, matches: Int) -> (topic: String, key: String, value: String) {
        let match = index % matches
        let step = index / matches
        if index % 10_000 == 9_999 { return ("sports.scores", "bench-\(match)", "not json \(index)") }
        if index % 10 < 7 {
            let minute = step % 90
            if step % 5 == 4 {
                return ("sports.scores", "bench-\(match)", #"{"type": "period", "match_id": "bench-\#(match)", "period": "\#(minute < 45 ? "first_half" : "second_half")", "minute": \#(minute)}"#)
            }
            return ("sports.scores", "bench-\(match)", #"{"type": "goal", "match_id": "bench-\#(match)", "minute": \#(minute), "scoring_team": "Owls", "scorer": "Ada", "score": {"home": \#(step), "away": \#(step / 2)}}"#)
        }
        let statuses = ["confirmed", "preparing", "picked_up", "on_the_way", "arriving"]
        return ("delivery.orders", "B-\(match)", #"{"order_id": "B-\#(match)", "status": "\#(statuses[step % statuses.count])", "eta": "2030-01-01T00:\#(String(format: "%02d", step % 60)):00Z", "driver": {"name": "Zoë"}, "restaurant": "Owl Pizza"}"#)
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench.rules-diff") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .error
        let client = KafkaClientConfiguration(bootstrapServers: bootstrapServers.split(separator: ",").map(String.init), properties: ["log_level": "3"])
        var start = since
        if !skipPublish {
            // A second back: the broker's clock may be a little behind this one.
            start = UnixTime(seconds: Date().timeIntervalSince1970 - 1).iso8601
            let admin = try KafkaAdmin(configuration: client, logger: logger)
            try await admin.createTopics(["sports.scores", "delivery.orders"].map { KafkaTopicSpecification(name: $0, partitions: partitions) })
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client, linger: .milliseconds(20)), logger: logger)
            let clock = ContinuousClock()
            let began = clock.now
            for index in 0..<events {
                let event = Self.event(index, matches: matches)
                while true {
                    do {
                        _ = try producer.enqueue(topic: event.topic, key: Array(event.key.utf8), value: Array(event.value.utf8))
                        break
                    } catch {
                        // librdkafka's queue is full: let it drain.
                        try await producer.flush()
                    }
                }
            }
            try await producer.flush(timeout: .seconds(300))
            let seconds = (clock.now - began).seconds
            print("published \(events) events in \(String(format: "%.1f", seconds)) s")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-bench-rules-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in try FileManager.default.contentsOfDirectory(atPath: rules) where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            let text = try String(contentsOfFile: (rules as NSString).appendingPathComponent(name), encoding: .utf8)
            try text.replacingOccurrences(of: Self.goalTitle.0, with: Self.goalTitle.1)
                .write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let process = Process()
        process.executableURL = try ChildProcess.livedispatch()
        process.arguments = ["rules", "diff", directory.path, "--base", rules, "--bootstrap-servers", bootstrapServers, "--since", start, "--stats", "--limit", "1"]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let errorReader = Task.detached { errors.fileHandleForReading.readDataToEndOfFile() }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let errorText = String(decoding: await errorReader.value, as: UTF8.self)
        for line in text.split(separator: "\n").prefix(6) { print(line) }
        for line in errorText.split(separator: "\n") { print(line) }
        let load = LoadAverage.current()
        print("load average: \(load); rules diff exited \(process.terminationStatus)")
        if process.terminationStatus != 0 { throw ExitCode(process.terminationStatus) }
    }
}
