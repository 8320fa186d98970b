import ArgumentParser
import Crypto
import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTesting
import Logging
import Synchronization

/// `livedispatch bench faults`: one scenario under each fault of the matrix,
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

/// The scenario every row runs: who gets what, and what each token must end at.
struct FaultScenario: Sendable {
    var activities: Int
    var tokensPerActivity: Int
    var bursts: Int
    var goalsPerBurst: Int

    var finalScore: Int { bursts * goalsPerBurst }

    static func matchID(_ activity: Int) -> String { "f-\(activity)" }

    /// A 32-byte token that tells its activity and index.
    static func token(activity: Int, index: Int) -> String {
        String(format: "%08x%08x", activity, index) + String(repeating: "fb", count: 24)
    }

    var tokens: [(activity: Int, token: String)] {
        (0..<activities).flatMap { activity in (0..<tokensPerActivity).map { (activity, Self.token(activity: activity, index: $0)) } }
    }

    /// Every token ends with its match's end push carrying the final score.
    var expected: [String: DeliveryAudit.State] {
        Dictionary(uniqueKeysWithValues: tokens.map { ($0.token, DeliveryAudit.State(version: Int64(finalScore), ended: true)) })
    }

    static func goal(_ activity: Int, score: Int) -> String {
        #"{"type":"goal","match_id":"\#(matchID(activity))","minute":\#(score),"scoring_team":"Owls","scorer":"Ada","score":{"home":\#(score),"away":0}}"#
    }

    static func finalWhistle(_ activity: Int, score: Int) -> String {
        #"{"type":"final_whistle","match_id":"\#(matchID(activity))","score":{"home":\#(score),"away":0}}"#
    }

    /// Records no worker can use, on the same keys as good ones: not JSON,
    /// not UTF-8, not an object, a rule's type error, and a command whose
    /// timestamp is out of range.
    static func poison(_ activity: Int, commandsTopic: String) -> [(topic: String, value: [UInt8])] {
        [
            ("sports.scores", Array(#"{"type":"goal","match_id":"#.utf8)),
            ("sports.scores", [0xFF, 0xFE, 0x7B, 0x00, 0xC3]),
            ("sports.scores", Array("[1,2,3]".utf8)),
            ("sports.scores", Array(#"{"type":"goal","match_id":"\#(matchID(activity))","score":{"home":"many","away":0}}"#.utf8)),
            (commandsTopic, Array(#"{"activity_id":"match-\#(matchID(activity))","event":"update","content_state":{"teamOneScore":0},"timestamp":1e300}"#.utf8)),
        ]
    }
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

/// Reads the simulator's record of accepted pushes as it grows and feeds
/// each one to the audit.
final class PushRecordTail: Sendable {
    private struct State {
        var audit: DeliveryAudit
        var offset: UInt64 = 0
        var partial: [UInt8] = []
        var lastDeliveryAt: ContinuousClock.Instant?
    }

    private let path: String
    private let state: Mutex<State>

    init(path: String, expected: [String: DeliveryAudit.State]) {
        self.path = path
        state = Mutex(State(audit: DeliveryAudit(expected: expected)))
    }

    var audit: DeliveryAudit { state.withLock { $0.audit } }
    var lastDeliveryAt: ContinuousClock.Instant? { state.withLock { $0.lastDeliveryAt } }

    /// Reads what was appended since the last call.
    func poll() {
        state.withLock { state in
            guard let handle = FileHandle(forReadingAtPath: path) else { return }
            defer { try? handle.close() }
            guard (try? handle.seek(toOffset: state.offset)) != nil, let data = try? handle.readToEnd(), !data.isEmpty else { return }
            state.offset += UInt64(data.count)
            var bytes = state.partial
            bytes.append(contentsOf: data)
            guard let end = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
                state.partial = bytes
                return
            }
            state.partial = Array(bytes[(end + 1)...])
            for line in bytes[..<end].split(separator: UInt8(ascii: "\n")) {
                guard let push = try? JSONValue.parse(Array(line)), let token = push["token"]?.stringValue else { continue }
                let aps = push["payload"]?["aps"]
                let score = aps?["content-state"]?["teamOneScore"]?.integerValue ?? -1
                state.audit.record(token: token, state: DeliveryAudit.State(version: score, ended: aps?["event"]?.stringValue == "end"))
                state.lastDeliveryAt = .now
            }
        }
    }
}

/// The workers of a row, some started and stopped while it runs.
final class WorkerFleet: Sendable {
    private struct Member {
        var process: WorkerProcess
        var admin: String
    }

    private let configuration: BenchWorkerFile
    private let directory: URL
    private let members = Mutex<[Member]>([])
    private let peak = Mutex<Double>(0)
    private let started = Atomic<Int>(0)

    init(configuration: BenchWorkerFile, directory: URL) {
        self.configuration = configuration
        self.directory = directory
    }

    /// Starts `count` workers and waits until each is ready.
    func start(_ count: Int) async throws {
        var added: [Member] = []
        for _ in 0..<count {
            let number = started.wrappingAdd(1, ordering: .relaxed).oldValue + 1
            var file = configuration
            file.adminPort = try freePort()
            let path = directory.appendingPathComponent("worker-\(number).yaml").path
            try Data(file.yaml.utf8).write(to: URL(fileURLWithPath: path))
            let process = try WorkerProcess(configuration: path, log: directory.appendingPathComponent("worker-\(number).log").path)
            added.append(Member(process: process, admin: "http://127.0.0.1:\(file.adminPort)"))
            members.withLock { $0.append(added[added.count - 1]) }
        }
        for member in added { try await member.process.waitUntilReady(admin: member.admin, timeout: 120) }
    }

    /// Admin URLs of the workers running.
    var admins: [String] { members.withLock { $0.filter(\.process.isRunning).map(\.admin) } }

    /// Records the peak RSS of every worker running; returns the largest seen so far.
    @discardableResult
    func samplePeak() -> Double {
        let current = members.withLock { $0.map { $0.process.peakResidentMegabytes() }.filter { !$0.isNaN } }.max() ?? 0
        return peak.withLock { peak in
            peak = max(peak, current)
            return peak
        }
    }

    /// Ends the most recently started workers that still run: SIGKILL when `kill`, else SIGTERM.
    func end(_ count: Int, kill: Bool) {
        samplePeak()
        let chosen = members.withLock { members in Array(members.filter(\.process.isRunning).suffix(count)) }
        for member in chosen { kill ? member.process.kill() : member.process.stop() }
    }

    /// Registers each (activity id, token) and waits until the workers have stored them.
    func register(_ registrations: [(activity: String, token: String)], topic: String, producer: KafkaProducer) async throws {
        var pending: [KafkaPendingDelivery] = []
        for (activity, token) in registrations {
            pending.append(try producer.enqueue(
                topic: topic, key: Array(activity.utf8), value: Array(#"{"activity_id":"\#(activity)","token":"\#(token)"}"#.utf8)))
        }
        for delivery in pending { _ = try await delivery.wait() }
        let count = Double(pending.count)
        try await waitUntil("the workers to store \(pending.count) tokens (logs in \(directory.path))", timeout: .seconds(max(120, count / 1_000)), longestPause: .milliseconds(20)) {
            var consumed = 0.0
            for admin in admins {
                guard let metrics = try? await httpGet(admin + "/metrics").body,
                      let body = try? await httpGet(admin + "/status").body, let status = try? JSONValue.parse(body),
                      status["in_progress"]?.integerValue == 0
                else { return false }
                consumed += BenchFanOutCommand.sample("livedispatch_records_consumed_total", labels: #"topic="tokens""#, in: metrics)
            }
            return consumed >= count
        }
    }

    /// Current resident set (`VmRSS`) of the first worker still running, in MB.
    func residentMegabytes() -> Double {
        members.withLock { $0.first(where: \.process.isRunning)?.process.residentMegabytes() } ?? .nan
    }

    func stopAll() {
        samplePeak()
        for member in members.withLock({ $0 }) { member.process.stop() }
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
            if let last = tail.lastDeliveryAt, ContinuousClock.now - last > .seconds(10), try await nothingInProgress(fleet) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        // A moment for late duplicates or stragglers to show in the record.
        try await Task.sleep(for: .seconds(2))
        tail.poll()
        guard tail.audit.everyTokenAtFinalState || ContinuousClock.now < deadline, let last = tail.lastDeliveryAt else { return nil }
        return max(0, (last - since).seconds)
    }

    private func nothingInProgress(_ fleet: WorkerFleet) async throws -> Bool {
        for admin in fleet.admins {
            guard let body = try? await httpGet(admin + "/status").body, let status = try? JSONValue.parse(body),
                  status["in_progress"]?.integerValue == 0
            else { return false }
        }
        return true
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


/// The processes of a run: an embedded Kafka cluster (`livedispatch kafka
/// embedded --control`) with the topics, or a broker given by its bootstrap
/// servers, the APNs simulator (`livedispatch simulate apns`), the workers,
/// and the benchmark's producer.
struct BenchStack {
    /// nil when the run uses a broker of its own (`broker`).
    var kafka: ChildProcess?
    var simulator: ChildProcess
    var fleet: WorkerFleet
    var producer: KafkaProducer
    var bootstrap: String

    static func start(
        directory: URL, prefix: String, partitions: Int, rules: String, ruleTopics: [String], simulatorOptions: [String],
        workers: Int, broker: String? = nil, producerLinger: Duration = .milliseconds(5), logger: Logger
    ) async throws -> BenchStack {
        let kafka: ChildProcess?
        if broker == nil {
            let topics = InternalTopic.allCases.map { prefix + $0.rawValue } + ruleTopics
            kafka = try ChildProcess(
                ["kafka", "embedded", "--brokers", "1", "--control"] + topics.flatMap { ["--topic", "\($0):\(partitions)"] },
                log: directory.appendingPathComponent("kafka.log").path, captureOutput: true)
        } else {
            kafka = nil
        }
        var simulator: ChildProcess?
        do {
            let bootstrap: String
            if let kafka {
                bootstrap = try await kafka.waitForLine(prefix: "bootstrap: ", timeout: 60)
            } else {
                bootstrap = broker ?? ""
                // The workers create the internal topics; the events' topics are created here.
                let admin = try KafkaAdmin(configuration: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]), logger: logger)
                try await admin.createTopics(ruleTopics.map { KafkaTopicSpecification(name: $0, partitions: partitions) })
            }
            let key = P256.Signing.PrivateKey()
            let keyPath = directory.appendingPathComponent("key.p8").path
            guard FileManager.default.createFile(atPath: keyPath, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw BenchError(description: "cannot write \(keyPath)")
            }
            let certificatePath = directory.appendingPathComponent("simulator.pem").path
            let started = try ChildProcess(
                ["simulate", "apns", "--team-id", BenchFanOutCommand.teamID, "--key-id", BenchFanOutCommand.keyID,
                 "--bundle-id", BenchFanOutCommand.bundleID, "--key", keyPath, "--cert-out", certificatePath,
                 "--history", "1000", "--threads", "1"] + simulatorOptions,
                log: directory.appendingPathComponent("simulator.log").path, captureOutput: true)
            simulator = started
            let endpoint = try await started.waitForLine(prefix: "listening: ", timeout: 60)
            let fleet = WorkerFleet(
                configuration: BenchWorkerFile(
                    bootstrap: bootstrap, prefix: prefix, partitions: partitions, rules: rules, apnsEndpoint: endpoint,
                    keyPath: keyPath, certificatePath: certificatePath, adminPort: 0, createTopics: kafka == nil, connections: 2,
                    window: "50ms"),
                directory: directory)
            do {
                try await fleet.start(workers)
                var configuration = KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: [bootstrap], properties: ["log_level": "3"]))
                configuration.linger = producerLinger
                configuration.maxQueuedRecords = 1_000_000
                let producer = try KafkaProducer(configuration: configuration, logger: logger)
                return BenchStack(kafka: kafka, simulator: started, fleet: fleet, producer: producer, bootstrap: bootstrap)
            } catch {
                fleet.stopAll()
                throw error
            }
        } catch {
            simulator?.stop()
            kafka?.stop()
            throw error
        }
    }

    /// Workers first, then the simulator and the cluster.
    func stop() {
        fleet.stopAll()
        simulator.stop()
        kafka?.stop()
    }
}
