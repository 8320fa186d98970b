import ArgumentParser
import Foundation
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker

/// The per-event and per-push work of one `commands` partition, without
/// Kafka, APNs or threads: commands the shipped rules make from goal events
/// go through the partition's machine on one thread, its sends and writes
/// are answered at once, and its clock moves at the offered rate. The
/// end-to-end benchmarks share two cores with a broker and a simulator, so
/// their figures move by a tenth from run to run; this one measures the
/// dispatcher's own CPU per command and per push.
struct BenchDispatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dispatch",
        abstract: "CPU per command and per push of one partition's dispatcher machine (no I/O).",
        discussion: """
            Prints the machine's CPU per command taken in (parse, merge, payload check) and per push \
            (flush, payload, send, completion, snapshot), measured on the calling thread.
            """)

    @Option(help: "Activities the commands go to, one goal each in turn.") var activities = 10_000
    @Option(help: "Device tokens per activity.") var tokens = 1
    @Option(help: "Commands fed to the machine.") var commands = 300_000
    @Option(help: "Commands per second of the machine's clock.") var rate = 30_000
    @Option(help: "Coalescing window (the worker's coalesce.window).") var window = "250ms"
    @Option(help: "Rules directory.") var rules = "Config/rules"

    func validate() throws {
        guard activities > 0, tokens > 0, commands > 0, rate > 0 else {
            throw ValidationError("--activities, --tokens, --commands and --rate must be above 0")
        }
        guard commands <= 10_000_000, activities * tokens <= 10_000_000 else {
            throw ValidationError("at most 10,000,000 commands and 10,000,000 tokens")
        }
    }

    func run() throws {
        guard let windowSeconds = WorkerConfiguration.duration(window) else {
            throw ValidationError("--window \(window.debugDescription) is not a duration such as 250ms")
        }
        let ruleSet: RuleSet
        do {
            ruleSet = try RuleSet.load(directory: rules)
        } catch {
            throw BenchError(description: "--rules \(rules): " + error.diagnostics.map(\.description).joined(separator: "\n"))
        }
        var configuration = PartitionDispatcher.Configuration()
        configuration.coalescer.window = windowSeconds
        configuration.coalescer.maxDelay = max(configuration.coalescer.maxDelay, windowSeconds)
        var machine = DispatchMachine(configuration: configuration)
        machine.registerTokens(activities: activities, tokens: tokens)

        // The commands the router would write, made before the clock starts.
        var values: [(key: [UInt8], value: [UInt8])] = []
        values.reserveCapacity(commands)
        var scores = Array(repeating: 0, count: activities)
        for offset in 0..<commands {
            let match = offset % activities
            scores[match] += 1
            let event = BenchWorkerCommand.goalEvent(match: match, score: scores[match])
            let record = EventRecord(topic: "sports.scores", offset: Int64(offset), key: "bench-\(match)", timestamp: machine.now)
            for case .command(let command) in ruleSet.evaluate(record, value: Array(event.utf8), now: machine.now) {
                values.append((Array(command.activityID.rawValue.utf8), command.routed.serialized()))
            }
        }
        guard values.count == commands else {
            throw ValidationError("the rules in \(rules) made \(values.count) commands of \(commands) goal events; the benchmark needs one each")
        }

        let step = 1 / Double(rate)
        for (offset, record) in values.enumerated() {
            machine.command(Int64(offset), key: record.key, value: record.value, step: step)
        }
        machine.finish()

        let intake = machine.intakeSeconds / Double(commands) * 1e6
        let perPush = machine.pushes == 0 ? 0 : machine.pushSeconds / Double(machine.pushes) * 1e6
        let total = machine.intakeSeconds + machine.pushSeconds
        print("""
            dispatch: \(commands) commands over \(activities) activities, \(tokens) token(s) each, window \(window), \(rate) commands/s on the machine's clock
            pushes: \(machine.pushes) (\(String(format: "%.1f", Double(commands * tokens) / Double(max(1, machine.pushes)))) command-token pairs per push), snapshots: \(machine.snapshots)
            intake: \(String(format: "%.2f", intake)) µs CPU per command (parse, merge, payload check)
            push: \(String(format: "%.2f", perPush)) µs CPU per push (flush, payload, send, completion, snapshot)
            total: \(String(format: "%.0f", Double(commands) / max(total, 1e-9))) commands per CPU second
            """)
    }
}

/// A partition's machine driven on the calling thread as its runner would
/// drive it: timers fired when the clock passes them, every send delivered
/// and every write acknowledged at once. CPU time is split between taking
/// in commands and everything after.
private struct DispatchMachine {
    var machine: PartitionDispatcher
    var now = UnixTime(seconds: 1_770_577_200)
    var intakeSeconds = 0.0
    var pushSeconds = 0.0
    var pushes = 0
    var snapshots = 0
    private var queue: [PartitionDispatcher.Action] = []

    init(configuration: PartitionDispatcher.Configuration) {
        machine = PartitionDispatcher(partition: 0, configuration: configuration)
        queue = machine.finishRestore(now: now)
        perform()
    }

    mutating func registerTokens(activities: Int, tokens: Int) {
        var offset: Int64 = 0
        for match in 0..<activities {
            for index in 0..<tokens {
                let hex = String(format: "%08x%08x", match, index) + String(repeating: "ab", count: 24)
                let value = Array(#"{"activity_id": "match-bench-\#(match)", "token": "\#(hex)"}"#.utf8)
                queue = machine.tokenRecord(.init(offset: offset, key: Array("match-bench-\(match)".utf8), value: value, timestamp: now), now: now)
                perform()
                offset += 1
            }
        }
        pushes = 0
        snapshots = 0
    }

    /// One command at `offset` (keyed by its activity, as the router writes
    /// it), then the clock moves by `step` and what came due runs.
    mutating func command(_ offset: Int64, key: [UInt8], value: [UInt8], step: Double) {
        let start = ThreadCPUTime.seconds()
        queue = machine.command(.init(offset: offset, key: key, value: value, timestamp: now), now: now)
        let taken = ThreadCPUTime.seconds()
        intakeSeconds += taken - start
        perform()
        now = now + step
        if let deadline = machine.nextDeadline, deadline <= now {
            queue = machine.timerFired(now: now)
            perform()
        }
        pushSeconds += ThreadCPUTime.seconds() - taken
    }

    /// Runs the clock on until nothing is held.
    mutating func finish() {
        let start = ThreadCPUTime.seconds()
        var firings = 0
        while let deadline = machine.nextDeadline, firings < 1_000_000, !machine.isIdle {
            firings += 1
            now = max(now, deadline)
            queue = machine.timerFired(now: now)
            perform()
        }
        pushSeconds += ThreadCPUTime.seconds() - start
    }

    private mutating func perform() {
        var index = 0
        while index < queue.count {
            let action = queue[index]
            index += 1
            switch action {
            case .send(let send):
                pushes += 1
                queue += machine.sendCompleted(send, outcome: .delivered, now: now, jitter: 0)
            case .produce(let produce):
                if produce.topic == .state { snapshots += 1 }
                queue += machine.acknowledged(produce.ticket, now: now)
            case .commit, .observe, .channel:
                break
            }
        }
        queue.removeAll(keepingCapacity: true)
    }
}
