import APNsSimulator
import ArgumentParser
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchDemo
import LiveDispatchTracing
import LiveDispatchWorker
import Logging
import Metrics
import Prometheus

/// `livedispatch-bench worker`: end-to-end throughput and latency of one worker.
struct BenchWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Measure one worker end to end: events/s in, pushes/s out, event-to-push latency.",
        discussion: """
            Starts a worker with an embedded Kafka cluster and the APNs simulator in this process, registers \
            --tokens tokens on each of --activities matches, then publishes goal events to sports.scores at \
            --rate events/s for --seconds, round-robin over the matches (each event raises its match's score by \
            one). It waits until every token holds its match's final score and prints the throughput and the \
            latency from an event's publication to each push carrying it, as the simulator received it. \
            Latency includes the coalescing window (--window) by design. It also prints how many commands the router \
            wrote and the dispatcher took in, and fails when they differ: the embedded cluster keeps 5 MB of each \
            partition and drops older records, so a worker that falls seconds behind loses commands there; measure a \
            saturated worker against a real broker (--bootstrap-servers).
            """
    )

    @Option(help: "Matches (activities).") var activities = 200
    @Option(help: "Tokens registered on each match.") var tokens = 5
    @Option(help: "Events published per second.") var rate = 2000
    @Option(help: "How long to publish, in seconds.") var seconds = 10.0
    @Option(help: "coalesce.window for the run.") var window = "250ms"
    @Option(help: "Rules directory.") var rules = "Config/rules"
    @Option(name: .customLong("bootstrap-servers"), help: "Kafka to use (host:port,…); an embedded cluster when omitted.")
    var bootstrapServers: String?
    @Option(
        name: .customLong("backpressure-high"),
        help: "backpressure.high_watermark for the run: records in progress above which the worker pauses (default: the worker's).")
    var backpressureHigh: Int?
    @Option(
        name: .customLong("linger-ms"),
        help: "How long the bench's producer (the backends) waits to fill a batch, in milliseconds.")
    var lingerMilliseconds = 1
    @Option(
        name: .customLong("log-level"),
        help: "The worker's log level during the run (notice shows its pauses and resumes).")
    var logLevel = "error"
    @Option(
        name: .customLong("tracing-endpoint"),
        help: "An OTLP/HTTP traces URL (http://host:port/v1/traces): the worker records spans and exports them there (default: tracing off).")
    var tracingEndpoint: String?
    @Option(name: .customLong("sampling-ratio"), help: "tracing.sampling_ratio of the run, with --tracing-endpoint.")
    var samplingRatio = 0.01

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level: expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \(logLevel.debugDescription)")
        }
        guard lingerMilliseconds >= 0, lingerMilliseconds <= 1_000 else {
            throw ValidationError("--linger-ms: expected 0 to 1000 milliseconds, got \(lingerMilliseconds)")
        }
        if let tracingEndpoint, OTLPHTTPClient.Endpoint(url: tracingEndpoint) == nil {
            throw ValidationError("--tracing-endpoint: expected http://host[:port]/path, got \(tracingEndpoint.debugDescription)")
        }
        guard (0...1).contains(samplingRatio) else {
            throw ValidationError("--sampling-ratio: expected 0 to 1, got \(samplingRatio)")
        }
        if let backpressureHigh, backpressureHigh < 2 {
            throw ValidationError("--backpressure-high: expected at least 2 records, got \(backpressureHigh)")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .error
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        // The metrics a deployed worker keeps (its per-record counters cost
        // what they cost there); they also tell whether every command was taken in.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "livedispatch.bench")
        var configuration = WorkerConfiguration()
        configuration.rules.path = rules
        configuration.rules.reloadInterval = 0
        configuration.admin.listen = ""
        // The mock cluster and Tansu hold an empty fetch for its whole wait (see BenchWorkerFile).
        configuration.kafka.properties["fetch.wait.max.ms"] = String(BenchWorkerFile.testBrokerFetchWaitMilliseconds)
        if let bootstrapServers {
            // A fresh prefix and group per run, so earlier runs' records are not read.
            let run = UUID().uuidString.prefix(6).lowercased()
            configuration.kafka.bootstrap = bootstrapServers
            configuration.kafka.topicPrefix = "bench\(run)."
            configuration.kafka.groupID = "bench\(run)"
            configuration.kafka.createTopics = true
            let admin = try KafkaAdmin(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrapServers]), logger: logger)
            _ = try await admin.createTopics([KafkaTopicSpecification(name: "sports.scores", partitions: configuration.kafka.partitions)])
        }
        guard let windowSeconds = WorkerConfiguration.duration(window) else {
            throw BenchError(description: "--window \(window.debugDescription) is not a duration such as 250ms")
        }
        if let backpressureHigh {
            // Resume at half, as the worker's defaults do.
            configuration.backpressure.highWatermark = backpressureHigh
            configuration.backpressure.lowWatermark = backpressureHigh / 2
        }
        configuration.coalesce.window = windowSeconds
        configuration.coalesce.maxDelay = max(configuration.coalesce.maxDelay, windowSeconds)
        if let tracingEndpoint {
            configuration.tracing.enabled = true
            configuration.tracing.endpoint = tracingEndpoint
            configuration.tracing.samplingRatio = samplingRatio
        }
        let total = Int(saturating: Double(rate) * seconds)
        var simulatorOptions = InProcessSimulator.Options()
        simulatorOptions.historyLimit = max(100_000, total * tokens * 2)
        // The run is judged from the history; a summary per token would be the simulator's work, not the worker's.
        simulatorOptions.tokenSummaries = false
        let (simulator, apns) = try await InProcessSimulator.start(configuration, options: simulatorOptions, logger: logger)
        let worker = try await Worker.start(configuration: configuration, options: .init(inProcessAPNs: { _, _ in apns }), logger: logger)

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            while !(worker.dispatcher.isReady && !worker.dispatcher.status.partitions.isEmpty) {
                try await Task.sleep(for: .milliseconds(20))
            }
            var client = KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [worker.bootstrapServers], properties: ["log_level": "3"]))
            client.linger = .milliseconds(lingerMilliseconds)
            client.maxQueuedRecords = 1_000_000
            let producer = try KafkaProducer(configuration: client, logger: logger)

            // Tokens first, and let the worker store them.
            var tokenActivity: [String: Int] = [:]
            var pending: [KafkaPendingDelivery] = []
            for match in 0..<activities {
                for index in 0..<tokens {
                    let hex = String(format: "%08x%08x", match, index) + String(repeating: "ab", count: 24)
                    tokenActivity[hex] = match
                    let value = #"{"activity_id": "match-bench-\#(match)", "token": "\#(hex)"}"#
                    pending.append(try producer.enqueue(topic: configuration.topic(.tokens), key: Array("match-bench-\(match)".utf8), value: Array(value.utf8)))
                }
            }
            for delivery in pending { _ = try await delivery.wait() }
            try await waitUntilIdle(worker)

            // A backend's producer is long-running: it knows where the topic
            // lives before the first event is timed.
            try await producer.prepare(topics: ["sports.scores"])

            // Events at the offered rate, in slices of 10 ms.
            var sentAt = Array(repeating: [Double](), count: activities)
            var scores = Array(repeating: 0, count: activities)
            let start = Date().timeIntervalSince1970
            var published = 0
            pending = []
            while published < total {
                let due = min(total, Int(saturating: (Date().timeIntervalSince1970 - start) * Double(rate)) + 1)
                while published < due {
                    let match = published % activities
                    scores[match] += 1
                    let event = Self.goalEvent(match: match, score: scores[match])
                    sentAt[match].append(Date().timeIntervalSince1970)
                    pending.append(try producer.enqueue(topic: "sports.scores", key: Array("bench-\(match)".utf8), value: Array(event.utf8)))
                    published += 1
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            let publishedBy = Date().timeIntervalSince1970
            for delivery in pending { _ = try await delivery.wait() }

            // Done when every token holds its match's final score. The check
            // shares the cores with the worker it measures: each pass reads
            // only the pushes that arrived since the previous one, and parses
            // a waiting token's newest of them.
            let deadline = Date().addingTimeInterval(300)
            var waiting = tokenActivity
            var seen = 0
            while Date() < deadline {
                let arrived = simulator.pushes(after: seen)
                seen = arrived.last?.sequence ?? seen
                var newest: [String: RecordedPush] = [:]
                for push in arrived where waiting[push.deviceToken] != nil { newest[push.deviceToken] = push }
                for (hex, push) in newest {
                    guard let match = waiting[hex] else { continue }
                    if push.payloadJSON?["aps"]?["content-state"]?["teamOneScore"]?.integerValue == Int64(scores[match]) {
                        waiting.removeValue(forKey: hex)
                    }
                }
                if waiting.isEmpty { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let pushes = simulator.pushes.filter { tokenActivity[$0.deviceToken] != nil }
            let finished = pushes.map(\.receivedAt).max() ?? publishedBy
            var latencies: [Double] = []
            var slowestBySecond: [Int: Double] = [:]
            for push in pushes {
                guard let match = tokenActivity[push.deviceToken],
                      let score = push.payloadJSON?["aps"]?["content-state"]?["teamOneScore"]?.integerValue,
                      score >= 1, Int(score) <= sentAt[match].count
                else { continue }
                let published = sentAt[match][Int(score) - 1]
                latencies.append(push.receivedAt - published)
                let second = Self.second(of: published, since: start)
                slowestBySecond[second] = max(slowestBySecond[second] ?? 0, push.receivedAt - published)
            }
            latencies.sort()
            func percentile(_ p: Double) -> Double {
                latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(saturating: Double(latencies.count) * p))] * 1000
            }
            let elapsed = finished - start
            print("""
                activities: \(activities), tokens: \(activities * tokens), offered: \(rate) events/s for \(seconds) s, window: \(window)
                events in: \(total) in \(String(format: "%.2f", publishedBy - start)) s published, all pushed by \(String(format: "%.2f", elapsed)) s: \(String(format: "%.0f", Double(total) / elapsed)) events/s
                pushes out: \(pushes.count): \(String(format: "%.0f", Double(pushes.count) / elapsed)) pushes/s (\(String(format: "%.1f", Double(total * tokens) / Double(max(1, pushes.count)))) event-token pairs per push)
                event-to-push latency ms: p50 \(String(format: "%.0f", percentile(0.5))), p90 \(String(format: "%.0f", percentile(0.9))), p99 \(String(format: "%.0f", percentile(0.99))), max \(String(format: "%.0f", (latencies.last ?? .nan) * 1000))
                """)
            print("slowest push by second of publication, ms: " + slowestBySecond.keys.sorted().map { String(format: "%.0f", (slowestBySecond[$0] ?? 0) * 1000) }.joined(separator: " "))
            try await printStages(worker: worker, configuration: configuration, sentAt: sentAt, pushes: pushes, start: start, logger: logger)
            var exposition: [UInt8] = []
            registry.emit(into: &exposition)
            let routed = Self.counter(#"livedispatch_router_events_total{outcome="command"}"#, in: exposition)
            let taken = Self.counter(#"livedispatch_records_consumed_total{topic="commands"}"#, in: exposition)
            print("commands: \(routed) routed, \(taken) taken in by the dispatcher")
            await worker.shutdown()
            try await group.waitForAll()
            if tracingEndpoint != nil {
                // Read after the shutdown: the exporter sends what was queued last.
                var after: [UInt8] = []
                registry.emit(into: &after)
                let dropped = ["queue_full", "export_failed"].map { reason in
                    "\(Self.counter("livedispatch_trace_spans_dropped_total{reason=\"\(reason)\"}", in: after)) \(reason)"
                }
                print("spans: \(Self.counter("livedispatch_trace_spans_exported_total", in: after)) exported, dropped: \(dropped.joined(separator: ", "))")
            }
            guard taken < routed else { return }
            guard bootstrapServers != nil else {
                // librdkafka's mock cluster keeps 5 MB of each partition and drops the oldest records.
                throw BenchError(description: """
                    the embedded cluster dropped \(routed - taken) commands the dispatcher had not read yet (it keeps 5 MB \
                    of each partition): the figures above count events that were never dispatched. Measure a saturated \
                    worker against a real broker (--bootstrap-servers, scripts/real-broker)
                    """)
            }
            throw BenchError(description: "\(routed - taken) commands routed were never taken in by the dispatcher")
        }
    }

    /// Where the latency goes: from an event's publication to the router's
    /// command (the `commands` record's timestamp), and from that command to
    /// the push that carries it.
    private func printStages(
        worker: Worker, configuration: WorkerConfiguration, sentAt: [[Double]], pushes: [RecordedPush], start: Double, logger: Logger
    ) async throws {
        let reader = KafkaPartitionReader(configuration: KafkaClientConfiguration(bootstrapServers: [worker.bootstrapServers], properties: ["log_level": "3"]), logger: logger)
        var commandAt: [String: Double] = [:]
        var router: [Double] = []
        var routedAt: [Double] = []
        for partition in 0..<Int32(configuration.kafka.partitions) {
            for record in try await reader.readAll(topic: configuration.topic(.commands), partition: partition) {
                guard let value = record.value, let milliseconds = record.timestampMilliseconds,
                      let command = try? JSONValue.parse(value),
                      let activity = command["activity_id"]?.stringValue, activity.hasPrefix("match-bench-"),
                      let match = Int(activity.dropFirst("match-bench-".count)), match < sentAt.count,
                      let score = command["content_state"]?["teamOneScore"]?.integerValue, score >= 1, Int(score) <= sentAt[match].count
                else { continue }
                let at = Double(milliseconds) / 1000
                commandAt["\(match)/\(score)"] = at
                router.append(at - sentAt[match][Int(score) - 1])
                routedAt.append(at)
            }
        }
        var dispatcher: [Double] = []
        for push in pushes {
            guard let score = push.payloadJSON?["aps"]?["content-state"]?["teamOneScore"]?.integerValue,
                  let match = push.deviceToken.prefix(8).isEmpty ? nil : Int(push.deviceToken.prefix(8), radix: 16),
                  let at = commandAt["\(match)/\(score)"]
            else { continue }
            dispatcher.append(push.receivedAt - at)
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return "n/a" }
            func at(_ p: Double) -> String { String(format: "%.0f", sorted[min(sorted.count - 1, max(0, Int(saturating: Double(sorted.count) * p)))] * 1000) }
            return "p50 \(at(0.5)), p90 \(at(0.9)), p99 \(at(0.99)), max \(at(1))"
        }
        print("event to command (router) ms: \(summary(router))")
        func perSecond(_ times: [Double]) -> String {
            var counts: [Int] = []
            for time in times {
                let second = Self.second(of: time, since: start)
                if counts.count <= second { counts.append(contentsOf: repeatElement(0, count: second + 1 - counts.count)) }
                counts[second] += 1
            }
            return counts.map(String.init).joined(separator: " ")
        }
        print("commands routed per second: \(perSecond(routedAt))")
        print("pushes received per second: \(perSecond(pushes.map(\.receivedAt)))")
        print("command to push (dispatcher, window included) ms: \(summary(dispatcher))")
    }

    /// The second of the run `time` falls in (0 to an hour).
    private static func second(of time: Double, since start: Double) -> Int {
        min(max(0, Int(saturating: (time - start).rounded(.down))), 3_600)
    }

    /// The goal event the benchmarks publish: match `bench-<match>`, the home side at `score`.
    static func goalEvent(match: Int, score: Int) -> String {
        #"{"type": "goal", "match_id": "bench-\#(match)", "minute": 1, "scoring_team": "Owls", "scorer": "Ada", "score": {"home": \#(score), "away": 0}}"#
    }

    /// A counter's value in a Prometheus exposition, 0 when absent.
    private static func counter(_ series: String, in exposition: [UInt8]) -> Int {
        let line = String(decoding: exposition, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(series + " ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.flatMap { Int(exactly: $0.rounded()) } ?? 0
    }

    private func waitUntilIdle(_ worker: Worker) async throws {
        var idleSince: Date?
        while true {
            try await Task.sleep(for: .milliseconds(50))
            if worker.dispatcher.isIdle {
                let since = idleSince ?? Date()
                idleSince = since
                if Date().timeIntervalSince(since) > 1 { return }
            } else {
                idleSince = nil
            }
        }
    }
}
