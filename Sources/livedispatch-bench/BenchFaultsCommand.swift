import ArgumentParser
import Foundation
import Kafka
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTesting
import Logging

/// `livedispatch-bench faults`: one scenario under each fault of the matrix,
/// against real processes, one row per fault.
struct BenchFaultsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "faults",
        abstract: "Run a fixed scenario under each fault (APNs, Kafka, workers) and print one row per fault.",
        discussion: """
            Each row starts its own processes: an embedded Kafka cluster (`livedispatch kafka embedded --control`), \
            the APNs simulator (`livedispatch simulate apns` with the row's faults, recording every accepted push) \
            and two workers (`livedispatch run`; one for `scale`). It registers --tokens tokens on each of \
            --activities matches, publishes --bursts bursts of --goals goals per match to sports.scores \
            --interval seconds apart, then a final whistle (an end) per match, injects the row's fault during the \
            load and waits until every token has received its match's end with the final score, or nothing moved \
            for 10 s, or --drain-timeout. Columns: `final` (every token's last push is its final state), `at final` \
            (tokens there), `unrecorded` (tokens short of it with no dead letter naming them: must be 0), `older>newer` (pushes older than one the token already had: must be 0), `dup %` (pushes of a state \
            the token already had), dead letters by reason, the workers' peak RSS, and the time from the last \
            publication to the last push. Exits 1 when a row has an older push after a newer one, or a token short of its final state without a dead letter.
            """
    )

    @Option(help: "Faults to run, comma-separated (default: all). One of: \(FaultCase.allCases.map(\.rawValue).joined(separator: ", ")).")
    var faults: String?
    @Option(help: "Matches (activities).") var activities = 100
    @Option(help: "Tokens registered on each match.") var tokens = 20
    @Option(help: "Bursts of goals per match.") var bursts = 5
    @Option(help: "Goals per match in each burst.") var goals = 4
    @Option(help: "Seconds between bursts.") var interval = 1.5
    @Option(name: .customLong("drain-timeout"), help: "Longest wait, in seconds, for the pushes after the last publication.")
    var drainTimeout = 120.0
    @Option(help: "Partitions of each topic.") var partitions = 6
    @Option(help: "Rules directory the workers load.") var rules = "Config/rules"
    @Flag(help: "Keep each row's logs, configuration and record of pushes (printed at the end).") var keep = false

    func validate() throws {
        guard activities >= 1, tokens >= 1, bursts >= 2, goals >= 1, partitions >= 1 else {
            throw ValidationError("--activities, --tokens, --goals and --partitions must be at least 1, --bursts at least 2")
        }
        guard activities * tokens <= 1_000_000, bursts * goals <= 10_000 else {
            throw ValidationError("at most 1,000,000 tokens and 10,000 goals per match")
        }
        guard interval >= 0, interval <= 60, drainTimeout > 0, drainTimeout <= 3_600 else {
            throw ValidationError("--interval must be 0 to 60 seconds, --drain-timeout above 0 and at most 3600")
        }
        _ = try selectedFaults()
    }

    func selectedFaults() throws -> [FaultCase] {
        guard let faults else { return FaultCase.allCases }
        return try faults.split(separator: ",").map { name in
            let name = name.trimmingCharacters(in: .whitespaces)
            guard let fault = FaultCase(rawValue: name) else {
                throw ValidationError("--faults: unknown fault '\(name)'; one of \(FaultCase.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return fault
        }
    }

    func run() async throws {
        // The bench's own Kafka clients see the faults too: their complaints are expected.
        var logger = Logger(label: "livedispatch.bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .critical
        let scenario = FaultScenario(activities: activities, tokensPerActivity: tokens, bursts: bursts, goalsPerBurst: goals)
        let ruleTopics = try RuleSetStore(directory: rules).current.topics
        print("scenario: \(activities) activities × \(tokens) tokens, \(bursts) bursts of \(goals) goals per activity \(interval) s apart, then an end; \(partitions) partitions")
        print(FaultRow.header)
        var failed: [String] = []
        var kept: [String] = []
        for fault in try selectedFaults() {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-faults-\(fault.rawValue)-\(UUID().uuidString.prefix(6))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let run = FaultRun(
                fault: fault, scenario: scenario, directory: directory, partitions: partitions, rules: rules,
                ruleTopics: ruleTopics.sorted(), interval: interval, drainTimeout: drainTimeout, logger: logger)
            let row: FaultRow
            do {
                row = try await run.run()
            } catch {
                print("\(fault.rawValue.padding(toLength: 18, withPad: " ", startingAt: 0)) did not run: \(error) (files: \(directory.path))")
                failed.append(fault.rawValue)
                kept.append(directory.path)
                continue
            }
            print(row.line)
            if !row.passed { failed.append(fault.rawValue) }
            if keep || !row.passed { kept.append(directory.path) } else { try? FileManager.default.removeItem(at: directory) }
        }
        for path in kept { print("files: \(path)") }
        if !failed.isEmpty {
            print("failed: \(failed.joined(separator: ", "))")
            throw ExitCode(1)
        }
    }
}

/// The faults of the matrix, in the order they run.
enum FaultCase: String, CaseIterable, Sendable {
    case baseline
    case apns500 = "apns-500"
    case apns429 = "apns-429"
    case goaway
    case connectionReset = "connection-reset"
    case streamLimit = "stream-limit-1"
    case latency = "latency-2s"
    case brokerDown = "broker-down"
    case kafkaErrors = "kafka-errors"
    case kill9 = "kill-9"
    case scale = "scale-1-3-1"
    case poison

    /// Options of `livedispatch simulate apns` for the row.
    var simulatorOptions: [String] {
        switch self {
        case .apns500: ["--error-rate", "0.3", "--error-statuses", "500"]
        case .apns429: ["--error-rate", "0.3", "--error-statuses", "429", "--retry-after", "1"]
        case .goaway: ["--goaway-after", "500"]
        case .connectionReset: ["--reset-after", "300"]
        // A 503 now and then is the rejection that drops a connection to one stream.
        case .streamLimit: ["--drop-to-one-after-rejection", "--error-rate", "0.01", "--error-statuses", "503"]
        case .latency: ["--latency-ms", "2000"]
        case .baseline, .brokerDown, .kafkaErrors, .kill9, .scale, .poison: []
        }
    }

    /// Workers at the start.
    var workers: Int { self == .scale ? 1 : 2 }
}

/// What one row measured.
struct FaultRow {
    var fault: FaultCase
    var audit: DeliveryAudit
    var deadLetters: [String: Int]
    /// Tokens a push dead letter names.
    var deadLetteredTokens: Set<String>
    var peakResidentMegabytes: Double
    var drainSeconds: Double?

    /// Tokens short of their final state with no dead letter saying why.
    var unrecorded: Int { audit.tokensShortWithoutDeadLetter(deadLetteredTokens) }

    /// No older push after a newer one, and every token at its final state
    /// unless a dead letter records why not.
    var passed: Bool { unrecorded == 0 && audit.olderAfterNewer == 0 }

    static let header = "fault              final  at final     unrecorded  older>newer  dup %   pushes   peak RSS  drain     dead letters"

    var line: String {
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        let letters = deadLetters.isEmpty ? "-" : deadLetters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return pad(fault.rawValue, 19)
            + pad(audit.everyTokenAtFinalState ? "yes" : "no", 7)
            + pad("\(audit.tokensAtFinalState)/\(audit.expected.count)", 13)
            + pad(String(unrecorded), 12)
            + pad(String(audit.olderAfterNewer), 13)
            + pad(String(format: "%.1f", audit.duplicatePercent), 8)
            + pad(String(audit.deliveries), 9)
            + pad(String(format: "%.0f MB", peakResidentMegabytes), 10)
            + pad(drainSeconds.map { String(format: "%.1f s", $0) } ?? "timeout", 10)
            + letters
    }
}

/// One row: its processes, the scenario under the fault, the checks.
struct FaultRun {
    var fault: FaultCase
    var scenario: FaultScenario
    var directory: URL
    var partitions: Int
    var rules: String
    var ruleTopics: [String]
    var interval: Double
    var drainTimeout: Double
    var logger: Logger

    static let prefix = "faults."

    func run() async throws -> FaultRow {
        let prefix = Self.prefix
        let recordPath = directory.appendingPathComponent("pushes.jsonl").path
        let stack = try await BenchStack.start(
            directory: directory, prefix: prefix, partitions: partitions, rules: rules, ruleTopics: ruleTopics,
            simulatorOptions: ["--record", recordPath] + fault.simulatorOptions, workers: fault.workers, logger: logger)
        defer { stack.stop() }
        let (fleet, producer, bootstrap) = (stack.fleet, stack.producer, stack.bootstrap)
        guard let kafka = stack.kafka else { throw BenchError(description: "the fault suite injects its faults into an embedded cluster") }
        try await fleet.register(
            scenario.tokens.map { ("match-" + FaultScenario.matchID($0.activity), $0.token) },
            topic: prefix + InternalTopic.tokens.rawValue, producer: producer)
        try await producer.prepare(topics: ["sports.scores", prefix + InternalTopic.commands.rawValue])

        let tail = PushRecordTail(path: recordPath, expected: scenario.expected)
        let published = try await publish(producer: producer, fleet: fleet, kafka: kafka, tail: tail)
        let drain = try await waitForDrain(fleet: fleet, tail: tail, since: published)
        let deadLetters = try await readDeadLetters(bootstrap: bootstrap)
        fleet.stopAll()
        return FaultRow(
            fault: fault, audit: tail.audit, deadLetters: deadLetters.reasons, deadLetteredTokens: deadLetters.tokens,
            peakResidentMegabytes: fleet.samplePeak(), drainSeconds: drain)
    }

    /// Publishes the bursts and the ends, with the row's fault injected
    /// during the load; once every record is acknowledged, returns when the
    /// last one was handed to the producer.
    private func publish(producer: KafkaProducer, fleet: WorkerFleet, kafka: ChildProcess, tail: PushRecordTail) async throws -> ContinuousClock.Instant {
        let commandsTopic = Self.prefix + InternalTopic.commands.rawValue
        var pending: [KafkaPendingDelivery] = []
        var faultTask: Task<Void, any Error>?
        for burst in 0..<scenario.bursts {
            for activity in 0..<scenario.activities {
                let key = Array(FaultScenario.matchID(activity).utf8)
                for goal in 1...scenario.goalsPerBurst {
                    let score = burst * scenario.goalsPerBurst + goal
                    pending.append(try producer.enqueue(topic: "sports.scores", key: key, value: Array(FaultScenario.goal(activity, score: score).utf8)))
                    if fault == .poison, burst == 1, goal == 1 {
                        for record in FaultScenario.poison(activity, commandsTopic: commandsTopic) {
                            let recordKey = record.topic == commandsTopic ? Array("match-\(FaultScenario.matchID(activity))".utf8) : key
                            pending.append(try producer.enqueue(topic: record.topic, key: recordKey, value: record.value))
                        }
                    }
                }
            }
            if burst == 0 { faultTask = Task { [self] in try await inject(fleet: fleet, kafka: kafka, tail: tail) } }
            try await Task.sleep(for: .seconds(interval))
        }
        for activity in 0..<scenario.activities {
            pending.append(try producer.enqueue(
                topic: "sports.scores", key: Array(FaultScenario.matchID(activity).utf8),
                value: Array(FaultScenario.finalWhistle(activity, score: scenario.finalScore).utf8)))
        }
        let lastPublished = ContinuousClock.now
        for delivery in pending { _ = try await delivery.wait() }
        try await faultTask?.value
        return lastPublished
    }

    /// The row's fault, once the first burst is on its way.
    private func inject(fleet: WorkerFleet, kafka: ChildProcess, tail: PushRecordTail) async throws {
        func control(_ line: String) async throws {
            let before = kafka.outputLines.count
            kafka.send(line)
            try await waitUntil("the embedded cluster to answer '\(line)'", timeout: .seconds(30), longestPause: .milliseconds(20)) { kafka.outputLines.count > before }
            guard let answer = kafka.outputLines.last, answer == "ok" else {
                throw BenchError(description: "the embedded cluster refused '\(line)': \(kafka.outputLines.last ?? "")")
            }
        }
        switch fault {
        case .brokerDown:
            try await control("broker-down 1")
            try await Task.sleep(for: .seconds(10))
            try await control("broker-up 1")
        case .kafkaErrors:
            // Retriable errors, as a broker sends them while leadership moves.
            try await control("errors produce 6 40")
            try await control("errors fetch 6 40")
            try await control("errors offset-commit 16 40")
        case .kill9:
            // Mid fan-out: once the first pushes of the load are in.
            try await waitUntil("the first pushes of the load", timeout: .seconds(60), longestPause: .milliseconds(20)) {
                tail.poll()
                return tail.audit.deliveries >= scenario.activities * scenario.tokensPerActivity / 2
            }
            fleet.end(1, kill: true)
        case .scale:
            try await fleet.start(2)
            try await Task.sleep(for: .seconds(3))
            fleet.end(2, kill: false)
        case .baseline, .apns500, .apns429, .goaway, .connectionReset, .streamLimit, .latency, .poison:
            break
        }
    }

    /// Seconds from `since` to the last push once every token is at its
    /// final state, or nothing moved for 10 s with nothing in progress;
    /// nil when the drain timed out.
    private func waitForDrain(fleet: WorkerFleet, tail: PushRecordTail, since: ContinuousClock.Instant) async throws -> Double? {
        let deadline = since + .seconds(drainTimeout)
        while ContinuousClock.now < deadline {
            tail.poll()
            fleet.samplePeak()
            let audit = tail.audit
            if audit.everyTokenAtFinalState { break }
            if let last = tail.lastDeliveryAt, ContinuousClock.now - last > .seconds(10), await fleet.nothingInProgress() { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        // A moment for late duplicates or stragglers to show in the record.
        try await Task.sleep(for: .seconds(2))
        tail.poll()
        guard tail.audit.everyTokenAtFinalState || ContinuousClock.now < deadline, let last = tail.lastDeliveryAt else { return nil }
        return max(0, (last - since).seconds)
    }

    /// Dead letters by reason, and the tokens of failed pushes they name.
    private func readDeadLetters(bootstrap: String) async throws -> (reasons: [String: Int], tokens: Set<String>) {
        let reader = KafkaPartitionReader(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), logger: logger)
        var counts: [String: Int] = [:]
        var tokens: Set<String> = []
        for partition in 0..<Int32(partitions) {
            for record in try await reader.readAll(topic: Self.prefix + InternalTopic.deadLetters.rawValue, partition: partition) {
                let letter = record.value.flatMap { try? JSONValue.parse($0) }
                counts[letter?["reason"]?.stringValue ?? "unreadable", default: 0] += 1
                if let token = letter?["token"]?.stringValue { tokens.insert(token) }
            }
        }
        return (counts, tokens)
    }
}
