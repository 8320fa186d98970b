import ArgumentParser
import Foundation
import Kafka
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchTesting
import LiveDispatchWorker
import Logging
import Synchronization

/// `livedispatch-bench scale`: workers added and removed under a steady
/// load against a real broker; per change, what the partitions that did not
/// move and those that did went through.
struct BenchScaleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Change the number of workers under a steady load and measure what each rebalance costs.",
        discussion: """
            Against a real broker (--bootstrap-servers; Tansu: `scripts/real-broker start`, this command run with \
            LD_LIBRARY_PATH="$(scripts/real-broker library-path)", a fresh broker per run, as the workers' groups read \
            sports.scores from its start) it starts the APNs simulator (`livedispatch simulate apns`, recording every \
            accepted push) and the first --steps count of workers (`livedispatch run`, --partitions partitions per \
            topic, the coalescing window --window), registers --tokens tokens spread over --activities matches (token i \
            on match i mod --activities), then publishes goal events to sports.scores at --rate per second, round-robin \
            over the matches, each raising its match's score by one. After --step-seconds it moves to each next count of \
            --steps in turn: it starts workers, or stops the most recently started ones with SIGTERM (at the first \
            decrease, one of them with SIGKILL; it does not wait for them to exit), waits until the other workers own \
            every `commands` partition between them, none moving in or out, in shares that differ by one at most, and \
            their routers route every sports.scores partition (their /status, polled every 100 ms), and keeps \
            the load on until --step-seconds after the change began (the next change follows at once when the \
            partitions took longer to be owned again). The events' producer is idempotent, so a lagging broker \
            cannot reorder a match's events. \
            Once the load stops it waits until every token holds its match's final score, or nothing was pushed for \
            10 s with nothing in progress, or --drain-timeout.

            Per change it prints the `commands` partitions that moved (their owner before the change differs from the \
            owner once the workers settled, or from the owner at the step's end: every partition owned by one worker, \
            none moving, the shares even) and the sports.scores partitions rerouted (their router's owner changed likewise: a match's \
            events pass through the router of their sports.scores partition, then the dispatcher of the match's \
            `commands` partition); `unmoved p99`: the 99th percentile, over the events published in the first 10 s of \
            the change of matches whose `commands` partition did not move and whose sports.scores partition was not \
            rerouted, of the time from an event's publication to the simulator accepting the first push of its \
            match's score or a later one (and that figure minus the window), beside the same matches' p99 over the 10 s \
            before the change (what the machine and the broker gave them just then); `rerouted p99`: the same for the matches \
            whose sports.scores partition was rerouted and whose `commands` partition did not move; `moved gap`: per moved \
            partition, the longest stretch without any push to a match of that partition that ends during the step \
            (from its start until the next change; a stretch still open at the step's end counts to the end), the \
            longest of them; and the share of the machine's CPU (all cores) busy in those 10 s: every process of the \
            run shares the machine, and so does the broker when it runs here. The gap is a proxy for the outage: at \
            thousands of events per second each partition gets pushes every few milliseconds, so a stretch without one \
            is a partition nobody dispatched. The summary adds pushes of a score older than one the token already held \
            (older-after-newer), matches whose final score some token never received (lost) and pushes of the score \
            the token already held (duplicates, as a share of all pushes). Exits 1 when older-after-newer or lost is \
            above 0.
            """
    )

    @Option(name: .customLong("bootstrap-servers"), help: "The broker (host:port,…), fresh: its sports.scores must be empty.")
    var bootstrapServers: String
    @Option(help: "Partitions of each topic.") var partitions = 12
    @Option(help: "Matches (activities).") var activities = 10_000
    @Option(help: "Tokens in all, spread over the matches.") var tokens = 100_000
    @Option(help: "Goal events published per second.") var rate = 2_000
    @Option(help: "Workers at the start, then after each change, comma-separated.") var steps = "1,2,4,2,1"
    @Option(name: .customLong("step-seconds"), help: "Seconds of load before the first change and from each change to the next.")
    var stepSeconds = 20.0
    @Option(help: "coalesce.window (and max_delay) of the workers.") var window = "50ms"
    @Option(name: .customLong("drain-timeout"), help: "Longest wait, in seconds, for the final pushes once the load stops.")
    var drainTimeout = 120.0
    @Option(help: "Rules directory the workers load.") var rules = "Config/rules"
    @Option(
        name: .customLong("session-timeout"),
        help: "session.timeout.ms of the workers' groups (2000–60000). Tansu holds each round of a rebalance for about half of it.")
    var sessionTimeout = 6000
    @Flag(help: "Keep the logs, configurations and record of pushes (printed at the end).") var keep = false
    @Flag(help: "Also print, per change, each second of its first 10 s: the p99 of the unmoved, rerouted and moved activities' events published in it.")
    var timeline = false

    /// The first 10 s of a change are the ones its unmoved p99 judges.
    static let judgedWholeSeconds = 10
    static let judgedSeconds = Double(judgedWholeSeconds)

    func validate() throws {
        guard partitions >= 1, partitions <= 1_000 else { throw ValidationError("--partitions must be 1 to 1000") }
        guard (2000...60000).contains(sessionTimeout) else { throw ValidationError("--session-timeout must be 2000 to 60000 (milliseconds)") }
        guard activities >= 1, activities <= 1_000_000 else { throw ValidationError("--activities must be 1 to 1,000,000") }
        guard tokens >= activities, tokens <= 1_000_000 else {
            throw ValidationError("--tokens must be at least --activities (\(activities)) and at most 1,000,000")
        }
        guard rate >= 1, rate <= 100_000 else { throw ValidationError("--rate must be 1 to 100,000 events per second") }
        guard stepSeconds >= 1, stepSeconds <= 3_600, drainTimeout > 0, drainTimeout <= 3_600 else {
            throw ValidationError("--step-seconds must be 1 to 3600, --drain-timeout above 0 and at most 3600")
        }
        _ = try workerCounts()
        _ = try windowSeconds()
    }

    func workerCounts() throws -> [Int] {
        let counts = steps.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        let numbers = counts.compactMap { $0 }
        guard numbers.count >= 2, numbers.count == counts.count, numbers.allSatisfy({ (1...64).contains($0) }) else {
            throw ValidationError("--steps: expected two or more worker counts of 1 to 64, comma-separated (1,2,4,2,1), got \(steps.debugDescription)")
        }
        guard zip(numbers, numbers.dropFirst()).allSatisfy({ $0 != $1 }) else {
            throw ValidationError("--steps: each count must differ from the one before it, got \(steps.debugDescription)")
        }
        return numbers
    }

    func windowSeconds() throws -> Double {
        guard let seconds = WorkerConfiguration.duration(window), seconds >= 0 else {
            throw ValidationError("--window: expected a duration such as 50ms, got \(window.debugDescription)")
        }
        return seconds
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .critical
        let counts = try workerCounts()
        let ruleTopics = try RuleSetStore(directory: rules).current.topics.sorted()
        try await requireFreshTopics(ruleTopics, logger: logger)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-scale-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A fresh prefix and groups per run: the internal topics of an earlier run are not read.
        let prefix = "scale\(UUID().uuidString.prefix(6).lowercased())."
        let recordPath = directory.appendingPathComponent("pushes.jsonl").path
        emit("scale: \(activities) activities, \(tokens) tokens, \(rate) events/s, \(partitions) partitions, workers \(counts.map(String.init).joined(separator: "→")), \(stepSeconds) s per step, window \(window), session timeout \(sessionTimeout) ms")
        let stack = try await BenchStack.start(
            directory: directory, prefix: prefix, partitions: partitions, rules: rules, ruleTopics: ruleTopics,
            simulatorOptions: ["--record", recordPath], workers: counts[0], broker: bootstrapServers, window: window,
            sessionTimeoutMilliseconds: sessionTimeout,
            // A broker falling behind makes a plain producer retry, which can reorder a match's events.
            idempotentProducer: true, logger: logger)
        defer { stack.stop() }
        let failed: Bool
        do {
            failed = try await ScaleRun(command: self, counts: counts, stack: stack, prefix: prefix, recordPath: recordPath, windowSeconds: try windowSeconds()).run()
        } catch {
            emit("files: \(directory.path)")
            throw error
        }
        stack.stop()
        if keep || failed { emit("files: \(directory.path)") } else { try? FileManager.default.removeItem(at: directory) }
        if failed { throw ExitCode(1) }
    }

    /// The workers' new groups read the events' topics from their start:
    /// records of an earlier run there would be replayed into this one.
    private func requireFreshTopics(_ topics: [String], logger: Logger) async throws {
        let client = KafkaClientConfiguration(bootstrapServers: [bootstrapServers], properties: ["log_level": "3"])
        let existing: [String: Int]
        do {
            existing = try await KafkaAdmin(configuration: client, logger: logger).partitionCounts()
        } catch {
            throw BenchError(description: """
                cannot read the topics of \(bootstrapServers): \(error). Is the broker running? Against Tansu, run with \
                LD_LIBRARY_PATH="$(scripts/real-broker library-path)"
                """)
        }
        let reader = KafkaPartitionReader(configuration: client, logger: logger)
        for topic in topics {
            guard let count = existing[topic] else { continue }
            guard count == partitions else {
                throw BenchError(description: "\(topic) has \(count) partitions on \(bootstrapServers), not \(partitions): start a fresh broker (scripts/real-broker stop; scripts/real-broker start)")
            }
            for partition in 0..<Int32(clamping: count) {
                if try await reader.endOffset(topic: topic, partition: partition) > 0 {
                    throw BenchError(description: "\(topic) already holds records on \(bootstrapServers), which this run's workers would read again: start a fresh broker (scripts/real-broker stop; scripts/real-broker start)")
                }
            }
        }
    }
}

/// One change of the number of workers, as measured.
struct ScaleStep {
    var from: Int
    var to: Int
    /// Unix seconds: when the change began, and when the next one began (or the load stopped).
    var start: Double
    var end: Double
    /// Seconds from the beginning of the change until the workers owned every partition between them.
    var settledSeconds: Double
    var moved: Set<Int>
    /// The sports.scores partitions whose router changed.
    var rerouted: Set<Int>
    /// Per worker stopped: the signal, and the seconds from the beginning
    /// of the change until it exited (nil while it still ran at the step's end).
    var stopped: [(signal: String, exitSeconds: Double?)]
}

extension ScaleStep {
    /// What a change did to a match's path: its events' router and its dispatcher.
    enum Kind: String, CaseIterable {
        /// Neither changed.
        case unmoved
        /// Its sports.scores partition changed router; its `commands` partition stayed.
        case rerouted
        /// Its `commands` partition moved.
        case moved
    }

    func kind(of activity: Int, in record: ScaleRecord) -> Kind {
        if moved.contains(record.partitionOf[activity]) { return .moved }
        return rerouted.contains(record.eventPartitionOf[activity]) ? .rerouted : .unmoved
    }
}

/// One run of `bench scale` on its started processes.
private struct ScaleRun {
    /// The worker (admin URL) of each `commands` partition, and of each sports.scores partition's router.
    typealias Owners = (commands: [Int: String], events: [Int: String])

    var command: BenchScaleCommand
    var counts: [Int]
    var stack: BenchStack
    var prefix: String
    var recordPath: String
    var windowSeconds: Double

    /// Runs the load and the changes, prints a line per change and the
    /// summary; returns whether the run failed its checks.
    func run() async throws -> Bool {
        let (fleet, producer) = (stack.fleet, stack.producer)
        let monitor = ScaleMonitor(record: ScaleRecord(activities: command.activities, tokens: command.tokens, partitions: command.partitions), path: recordPath)
        let registering = ContinuousClock.now
        try await fleet.register(
            monitor.registrations.map { ("match-" + FaultScenario.matchID($0.activity), $0.token) },
            topic: prefix + InternalTopic.tokens.rawValue, producer: producer)
        emit(String(format: "registered %d tokens in %.1f s", command.tokens, (ContinuousClock.now - registering).seconds))
        var owners = try await settledOwners(workers: counts[0])
        try await producer.prepare(topics: ["sports.scores"])

        // The publisher and the reader of the record run until cancelled.
        let (steps, load) = try await withThrowingTaskGroup(of: Void.self, returning: ([ScaleStep], ClosedRange<Double>).self) { group in
            group.addTask { await publish(producer: producer, monitor: monitor) }
            group.addTask {
                while !Task.isCancelled {
                    monitor.poll()
                    monitor.sampleCPU()
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            let loadStart = Date().timeIntervalSince1970
            try await Task.sleep(for: .seconds(command.stepSeconds))
            var steps: [ScaleStep] = []
            var killed = false
            for (from, to) in zip(counts, counts.dropFirst()) {
                let begin = ContinuousClock.now
                let start = Date().timeIntervalSince1970
                let kill = to < from && !killed
                var stopped: [WorkerProcess] = []
                if to > from {
                    try await fleet.start(to - from)
                } else {
                    stopped = fleet.signal(from - to, killing: kill ? 1 : 0)
                    killed = killed || kill
                }
                let after = try await settledOwners(workers: to)
                let settled = (ContinuousClock.now - begin).seconds
                emit(String(format: "  %d→%d: partitions owned again after %.1f s", from, to, settled))
                try await Task.sleep(until: begin + .seconds(command.stepSeconds), clock: .continuous)
                // A partition counts as moved when its owner changed by the
                // time the workers settled or later in the step: an assignor
                // may move partitions in more than one rebalance.
                let last = try await settledOwners(workers: to)
                let moved = Set((0..<command.partitions).filter {
                    owners.commands[$0] != after.commands[$0] || after.commands[$0] != last.commands[$0]
                })
                let rerouted = Set((0..<command.partitions).filter {
                    owners.events[$0] != after.events[$0] || after.events[$0] != last.events[$0]
                })
                steps.append(ScaleStep(
                    from: from, to: to, start: start, end: Date().timeIntervalSince1970, settledSeconds: settled, moved: moved,
                    rerouted: rerouted,
                    stopped: stopped.enumerated().map { index, process in
                        (index < (kill ? 1 : 0) ? "SIGKILL" : "SIGTERM", process.exitedAt.map { ($0 - begin).seconds })
                    }))
                owners = last
            }
            group.cancelAll()
            try await group.waitForAll()
            return (steps, loadStart...Date().timeIntervalSince1970)
        }
        do {
            try await producer.flush(timeout: .seconds(command.drainTimeout))
        } catch {
            throw BenchError(description: "the broker did not take the events published within --drain-timeout (\(error)); offer fewer (--rate)")
        }
        let drained = try await drain(monitor: monitor, fleet: fleet)
        return report(steps: steps, load: load, record: monitor.record, drained: drained, busy: monitor.busyShare(within:))
    }

    /// Publishes goal events at the offered rate, round-robin over the
    /// matches, in slices of about 10 ms, until cancelled.
    private func publish(producer: KafkaProducer, monitor: ScaleMonitor) async {
        let start = ContinuousClock.now
        var scores = [Int](repeating: 0, count: command.activities)
        var offered = 0
        var refused = 0
        while !Task.isCancelled {
            let due = Int(saturating: (ContinuousClock.now - start).seconds * Double(command.rate))
            var slice: [(activity: Int, at: Double)] = []
            while offered < due {
                let activity = offered % command.activities
                offered += 1
                let at = Date().timeIntervalSince1970
                do {
                    _ = try producer.enqueue(
                        topic: "sports.scores", key: Array(FaultScenario.matchID(activity).utf8),
                        value: Array(FaultScenario.goal(activity, score: scores[activity] + 1).utf8))
                    scores[activity] += 1
                    slice.append((activity, at))
                } catch {
                    // The producer's queue is full: more than the broker takes.
                    refused += 1
                }
            }
            monitor.published(slice, backlog: producer.outstandingRecords)
            try? await Task.sleep(for: .milliseconds(10))
        }
        emit("published \(offered - refused) events\(refused > 0 ? ", \(refused) refused by the producer's full queue" : "")")
    }

    /// Which worker (admin URL) owns each `commands` partition and routes
    /// each sports.scores partition, once the `workers` running own and
    /// route all of them between them, each ready.
    private func settledOwners(workers: Int) async throws -> Owners {
        let partitions = command.partitions
        return try await waitFor(
            "\(workers) workers to own and route the \(partitions) partitions between them", timeout: .seconds(180), longestPause: .milliseconds(100)
        ) { () -> Owners? in
            guard let statuses = await stack.fleet.statuses(),
                  let commands = WorkerStatus.owners(statuses, workers: workers, partitions: partitions),
                  let events = WorkerStatus.routers(statuses, workers: workers, topic: "sports.scores", partitions: partitions)
            else { return nil }
            return (commands, events)
        }
    }

    /// Waits until every token holds its match's final score, or nothing
    /// was pushed for 10 s with nothing in progress, then until no push
    /// came for 2 s (late duplicates); false when --drain-timeout passed first.
    private func drain(monitor: ScaleMonitor, fleet: WorkerFleet) async throws -> Bool {
        do {
            try await waitUntil("every token's final score", timeout: .seconds(command.drainTimeout), longestPause: .milliseconds(200)) {
                monitor.poll()
                if monitor.read(\.lostActivities) == 0 { return true }
                let last = monitor.read(\.lastPushAt) ?? 0
                return Date().timeIntervalSince1970 - last > 10 ? await fleet.nothingInProgress() : false
            }
            try await waitUntil("no push for 2 s", timeout: .seconds(30), longestPause: .milliseconds(200)) {
                monitor.poll()
                return Date().timeIntervalSince1970 - (monitor.read(\.lastPushAt) ?? 0) > 2
            }
            return true
        } catch is WaitTimeout {
            monitor.poll()
            return false
        }
    }

    /// Prints a line per change and the summary; returns whether the run failed.
    /// `busy`: the share of the machine's CPU busy within a stretch of time.
    private func report(
        steps: [ScaleStep], load: ClosedRange<Double>, record: ScaleRecord, drained: Bool, busy: (ClosedRange<Double>) -> Double?
    ) -> Bool {
        func share(_ window: ClosedRange<Double>) -> String { busy(window).map { String(format: "%.0f %%", $0 * 100) } ?? "n/a" }
        func milliseconds(_ seconds: Double?) -> String { seconds.map { String(format: "%.0f ms", $0 * 1000) } ?? "n/a" }
        func p99(_ window: ClosedRange<Double>, _ included: (Int) -> Bool) -> (text: String, value: Double?) {
            let (seconds, unpushed) = record.latencies(published: window, of: included)
            let value = ScaleRecord.percentile(0.99, of: seconds)
            guard let value else { return ("n/a", nil) }
            let excess = String(format: "window%+.0f", (value - windowSeconds) * 1000)
            return ("\(milliseconds(value)) (\(excess))\(unpushed > 0 ? ", \(unpushed) events never pushed" : "")", value)
        }
        let firstChange = steps.first?.start ?? load.upperBound
        let steady = p99(max(load.lowerBound, firstChange - BenchScaleCommand.judgedSeconds)...firstChange) { _ in true }
        emit("before the first change (\(counts[0]) worker\(counts[0] == 1 ? "" : "s")): p99 \(steady.text) over the last \(String(format: "%g", BenchScaleCommand.judgedSeconds)) s")
        var unmovedWorst: Double?
        var reroutedWorst: Double?
        var gapWorst: Double?
        for step in steps {
            let judged = step.start...min(step.end, step.start + BenchScaleCommand.judgedSeconds)
            let kind = { (activity: Int) in step.kind(of: activity, in: record) }
            let unmoved = p99(judged) { kind($0) == .unmoved }
            // The same matches over the 10 s before the change: what the
            // machine and the broker gave them just then, for comparison.
            let before = p99(max(load.lowerBound, step.start - BenchScaleCommand.judgedSeconds)...step.start) { kind($0) == .unmoved }
            let rerouted = p99(judged) { kind($0) == .rerouted }
            let gap = step.moved.map { record.longestGap(partition: $0, endingWithin: step.start...step.end) }.max()
            if let value = unmoved.value { unmovedWorst = max(unmovedWorst ?? 0, value) }
            if let value = rerouted.value { reroutedWorst = max(reroutedWorst ?? 0, value) }
            if let gap { gapWorst = max(gapWorst ?? 0, gap) }
            let backlog = record.producerBacklog(within: step.start...step.end)
            let exits = step.stopped.map { stopped in
                stopped.signal + " " + (stopped.exitSeconds.map { String(format: "exited after %.1f s", $0) } ?? "still running at the step's end")
            }
            emit(
                "step \(step.from)→\(step.to): moved \(step.moved.count) of \(command.partitions) partitions, rerouted \(step.rerouted.count); "
                    + "unmoved partitions p99 \(unmoved.text), the 10 s before \(milliseconds(before.value)); rerouted p99 \(rerouted.text); "
                    + "moved partitions without pushes for max \(milliseconds(gap)); all owned again after \(String(format: "%.1f", step.settledSeconds)) s"
                    + "; machine busy \(share(judged))"
                    + (exits.isEmpty ? "" : "; stopped: \(exits.joined(separator: ", "))")
                    // Over a second of events waiting in this process: the broker fell behind, and the latency shows it.
                    + (backlog > command.rate ? "; up to \(backlog) events waited in this process's producer" : ""))
            if command.timeline { emitTimeline(of: step, record: record, share: share) }
        }
        let lost = record.lostActivities
        emit(
            "scale: \(counts.count) steps, unmoved p99 max \(milliseconds(unmovedWorst)), rerouted p99 max \(milliseconds(reroutedWorst)), "
                + "moved gap max \(milliseconds(gapWorst)), "
                + "older-after-newer \(record.olderAfterNewer), lost \(lost), duplicates \(String(format: "%.1f", record.duplicatePercent)) %")
        emit(
            "pushes: \(record.pushes)\(record.unknown > 0 ? ", \(record.unknown) to unknown tokens or without a score" : "")"
                + (drained ? "" : "; the drain timed out after \(Int(command.drainTimeout)) s")
                + String(
                    format: "; this process used %.1f s of CPU, peak RSS %.0f MB", ThreadCPUTime.processSeconds(),
                    ProcessStatus.megabytes("VmHWM:", process: "self")))
        return record.olderAfterNewer > 0 || lost > 0
    }
}

extension ScaleRun {
    /// Each second of the step's first 10 s: the p99 and count of the
    /// unmoved, rerouted and moved matches' events published in it.
    fileprivate func emitTimeline(of step: ScaleStep, record: ScaleRecord, share: (ClosedRange<Double>) -> String) {
        for second in 0..<BenchScaleCommand.judgedWholeSeconds {
            let slice = (step.start + Double(second))...(step.start + Double(second + 1))
            guard slice.lowerBound < step.end else { break }
            let parts = ScaleStep.Kind.allCases.map { wanted in
                let (seconds, unpushed) = record.latencies(published: slice) { step.kind(of: $0, in: record) == wanted }
                let value = ScaleRecord.percentile(0.99, of: seconds).map { String(format: "%.0f", $0 * 1000) } ?? "-"
                return "\(wanted.rawValue) \(value) ms (\(seconds.count)\(unpushed > 0 ? "+\(unpushed) unpushed" : ""))"
            }
            emit("  +\(second) s: p99 " + parts.joined(separator: ", ") + ", machine busy \(share(slice))")
        }
    }
}

/// The run's record, fed from the simulator's record file as it grows and
/// from the publisher.
private final class ScaleMonitor: Sendable {
    private let state: Mutex<ScaleRecord>
    private let lines: Mutex<AppendedLines>
    /// Readings of the machine's CPU time, every 100 ms while the load runs.
    private let cpu = Mutex<[(at: Double, cpu: MachineCPU)]>([])

    init(record: ScaleRecord, path: String) {
        state = Mutex(record)
        lines = Mutex(AppendedLines(path: path))
    }

    /// Every token with its match.
    var registrations: [(activity: Int, token: String)] {
        state.withLock { record in (0..<record.tokens).map { (activity: $0 % record.activities, token: record.token($0)) } }
    }

    var record: ScaleRecord { state.withLock { $0 } }

    func read<T>(_ property: (ScaleRecord) -> T) -> T { state.withLock { property($0) } }

    /// Records the publication of `events`, and the records the producer held then.
    func published(_ events: [(activity: Int, at: Double)], backlog: Int) {
        let now = Date().timeIntervalSince1970
        state.withLock { record in
            for event in events { _ = record.published(event.activity, at: event.at) }
            record.producerHeld(backlog, at: now)
        }
    }

    /// Takes a reading of the machine's CPU time.
    func sampleCPU() {
        guard let reading = MachineCPU.now() else { return }
        let now = Date().timeIntervalSince1970
        cpu.withLock { $0.append((now, reading)) }
    }

    /// The share of the machine's CPU busy between the readings nearest to
    /// the ends of `window`; nil without two readings in it.
    func busyShare(within window: ClosedRange<Double>) -> Double? {
        cpu.withLock { readings in
            guard let first = readings.first(where: { $0.at >= window.lowerBound }),
                  let last = readings.last(where: { $0.at <= window.upperBound }), last.at > first.at
            else { return nil }
            return last.cpu.busyShare(since: first.cpu)
        }
    }

    /// Reads the pushes recorded since the last call, a few megabytes at a
    /// time (parsed outside the record's lock).
    func poll() {
        while case let lines = lines.withLock({ $0.read() }), !lines.isEmpty {
            let pushes = lines.compactMap(RecordedPushLine.init)
            state.withLock { record in
                for push in pushes { record.received(push) }
            }
        }
    }
}
