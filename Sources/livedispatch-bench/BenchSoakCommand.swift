import ArgumentParser
import Foundation
import Kafka
import LiveDispatchBench
import LiveDispatchCore
import LiveDispatchRules
import Logging

/// `livedispatch-bench soak`: a worker process under more load than it can
/// take, for minutes, its resident set sampled: back-pressure must keep it flat.
struct BenchSoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Offer a worker process more events than it can take for minutes and check its memory stays flat.",
        discussion: """
            Starts an embedded Kafka cluster process, the APNs simulator process and one worker process, registers \
            --tokens tokens on each of --activities matches, then publishes goal events to sports.scores at --rate \
            events/s for --minutes, round-robin over the matches. Every --sample-seconds it prints the worker's \
            resident set (VmRSS) and the commands it dispatched; at the end it prints how many times what the worker \
            dispatched the offered rate was, the mean resident set after --warm-up-seconds and the samples' lowest \
            and highest deviation from it, and exits 1 when a sample after warm-up lies more than --tolerance \
            percent from the mean. The embedded cluster keeps a bounded tail (5 MB) of each partition and drops \
            its oldest record on every append; a worker far behind then chases the start of the log and reads \
            nothing (RELIABILITY.md). To offer more than the worker takes for minutes, give a broker that keeps \
            the backlog with --bootstrap (e.g. Tansu: `scripts/real-broker start`, every process run with \
            LD_LIBRARY_PATH="$(scripts/real-broker library-path)"); the worker creates its internal topics there \
            and the soak creates the events' topic. Tansu keeps up when producers batch: --linger-ms for the soak's \
            producer, LIVEDISPATCH_KAFKA_PROPERTIES_LINGER_MS for the worker's.
            """
    )

    @Option(help: "How long to offer the load, in minutes.") var minutes = 10.0
    @Option(help: "Events offered per second.") var rate = 33_000
    @Option(help: "Matches (activities).") var activities = 10_000
    @Option(help: "Tokens registered on each match: more makes every event cost more pushes.") var tokens = 1
    @Option(name: .customLong("sample-seconds"), help: "Seconds between resident-set samples.") var sampleSeconds = 10.0
    @Option(name: .customLong("warm-up-seconds"), help: "Samples before this are not judged.") var warmUpSeconds = 120.0
    @Option(help: "Allowed deviation from the mean after warm-up, in percent.") var tolerance = 15.0
    @Option(help: "Partitions of each topic.") var partitions = 6
    @Option(help: "Rules directory the worker loads.") var rules = "Config/rules"
    @Option(help: "Bootstrap servers of a broker to use instead of an embedded cluster (host:port,…).") var bootstrap: String?
    @Option(name: .customLong("linger-ms"), help: "How long the soak's producer (the backend) waits to fill a batch, in milliseconds.") var lingerMilliseconds = 5
    @Flag(help: "Keep the logs and configuration (printed at the end).") var keep = false

    func validate() throws {
        guard minutes > 0, minutes <= 24 * 60 else { throw ValidationError("--minutes must be above 0 and at most 1440") }
        guard rate >= 1, rate <= 1_000_000, activities >= 1, activities <= 1_000_000, partitions >= 1 else {
            throw ValidationError("--rate and --activities must be 1 to 1,000,000, --partitions at least 1")
        }
        guard tokens >= 1, tokens <= 1_000_000, activities * tokens <= 1_000_000 else {
            throw ValidationError("--tokens must be at least 1, and --activities × --tokens at most 1,000,000")
        }
        guard lingerMilliseconds >= 0, lingerMilliseconds <= 10_000 else { throw ValidationError("--linger-ms must be 0 to 10000") }
        guard sampleSeconds >= 1, sampleSeconds <= 3_600, warmUpSeconds >= 0, warmUpSeconds < minutes * 60,
              tolerance > 0, tolerance <= 100
        else {
            throw ValidationError("--sample-seconds must be 1 to 3600, --warm-up-seconds shorter than the run, --tolerance 0 to 100")
        }
    }

    func run() async throws {
        var logger = Logger(label: "livedispatch.bench") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .critical
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-soak-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let prefix = "soak."
        let stack = try await BenchStack.start(
            directory: directory, prefix: prefix, partitions: partitions, rules: rules,
            ruleTopics: try RuleSetStore(directory: rules).current.topics.sorted(), simulatorOptions: [], workers: 1, broker: bootstrap,
            producerLinger: .milliseconds(lingerMilliseconds), logger: logger)
        defer { stack.stop() }
        try await stack.fleet.register(
            (0..<activities).flatMap { match in
                (0..<tokens).map { ("match-" + FaultScenario.matchID(match), FaultScenario.token(activity: match, index: $0)) }
            },
            topic: prefix + InternalTopic.tokens.rawValue, producer: stack.producer)
        try await stack.producer.prepare(topics: ["sports.scores"])
        emit("soak: \(rate) events/s offered for \(minutes) min over \(activities) activities of \(tokens) token(s); worker RSS every \(sampleSeconds) s")

        var series = ResidentSetSeries(warmUpSeconds: warmUpSeconds, tolerancePercent: tolerance)
        var scores = [Int](repeating: 0, count: activities)
        let start = ContinuousClock.now
        let end = start + .seconds(minutes * 60)
        var nextSample = start
        var published = 0
        var refused = 0
        var steadyFrom: (seconds: Double, progress: WorkerProgress)?
        var last: (seconds: Double, progress: WorkerProgress)?
        while ContinuousClock.now < end {
            guard stack.fleet.residentMegabytes().isFinite else { throw BenchError(description: "the worker exited; see \(directory.path)") }
            let elapsed = (ContinuousClock.now - start).seconds
            if ContinuousClock.now >= nextSample {
                let megabytes = stack.fleet.residentMegabytes()
                series.add(.init(seconds: elapsed, megabytes: megabytes))
                let line = String(format: "  %5.0f s  rss %6.1f MB  published %d", elapsed, megabytes, published)
                if let progress = await WorkerProgress.read(stack.fleet) {
                    if elapsed >= warmUpSeconds, steadyFrom == nil { steadyFrom = (elapsed, progress) }
                    last = (elapsed, progress)
                    emit(line + String(
                        format: "  routed %.0f  dispatched %.0f  pushed %.0f  in progress %.0f  paused %@  routing paused %@  cpu %.1f s",
                        progress.routed, progress.dispatched, progress.pushed, progress.inProgress, progress.paused ? "yes" : "no",
                        progress.routingPaused ? "yes" : "no", progress.cpuSeconds))
                } else {
                    emit(line + "  (the worker's /metrics did not answer within 5 s)")
                }
                nextSample = nextSample + .seconds(sampleSeconds)
            }
            // Events due by now at the offered rate, in slices of about 10 ms.
            let due = min(Double(Int.max / 2), elapsed * Double(rate)).rounded(.down)
            while Double(published + refused) < due {
                let match = (published + refused) % activities
                scores[match] += 1
                do {
                    _ = try stack.producer.enqueue(
                        topic: "sports.scores", key: Array(FaultScenario.matchID(match).utf8),
                        value: Array(FaultScenario.goal(match, score: scores[match]).utf8))
                    published += 1
                } catch {
                    // The producer's queue is full: the offered load is above what Kafka takes.
                    refused += 1
                }
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let seconds = (ContinuousClock.now - start).seconds
        emit(String(format: "published: %d events in %.0f s (%.0f/s); refused by the producer's full queue: %d", published, seconds, Double(published) / seconds, refused))
        if let steadyFrom, let last, last.seconds > steadyFrom.seconds {
            let span = last.seconds - steadyFrom.seconds
            // Each goal event becomes one command: what the worker took is
            // the commands whose pushes completed.
            let dispatched = (last.progress.dispatched - steadyFrom.progress.dispatched) / span
            emit(String(
                format: "worker after warm-up: %.0f events routed/s, %.0f commands dispatched/s, %.0f pushes/s; offered %.1f times what it dispatched",
                (last.progress.routed - steadyFrom.progress.routed) / span, dispatched,
                (last.progress.pushed - steadyFrom.progress.pushed) / span, dispatched > 0 ? Double(rate) / dispatched : Double.infinity))
            // Its own process only: the soak's producer, the simulator and the broker are not in it.
            emit(String(format: "worker CPU after warm-up: %.2f cores", (last.progress.cpuSeconds - steadyFrom.progress.cpuSeconds) / span))
        }
        if let mean = series.steadyMean, let deviation = series.deviationPercent {
            emit(String(
                format: "rss after %.0f s warm-up: mean %.1f MB, %+.1f %% to %+.1f %% over %d samples: %@",
                warmUpSeconds, mean, deviation.low, deviation.high, series.steady.count,
                series.isStable ? "within ±\(tolerance) %" : "NOT within ±\(tolerance) %"))
        }
        stack.stop()
        if keep { emit("files: \(directory.path)") } else { try? FileManager.default.removeItem(at: directory) }
        if !series.isStable { throw ExitCode(1) }
    }
}

/// What a worker has done so far, from its metrics.
struct WorkerProgress {
    var routed = 0.0
    /// Commands whose pushes completed: what the worker has fully taken in.
    var dispatched = 0.0
    var pushed = 0.0
    var inProgress = 0.0
    var paused = false
    /// The router waits for the worker's dispatching backlog.
    var routingPaused = false
    /// The worker process's CPU time so far, in seconds.
    var cpuSeconds = 0.0

    /// nil when the worker's metrics cannot be read.
    static func read(_ fleet: WorkerFleet) async -> WorkerProgress? {
        guard let admin = fleet.admins.first, let metrics = try? await httpGet(admin + "/metrics").body else { return nil }
        return WorkerProgress(
            routed: BenchFanOutCommand.sample("livedispatch_router_events_total", labels: "", in: metrics),
            dispatched: BenchFanOutCommand.sample("livedispatch_commands_dispatched_total", labels: "", in: metrics),
            pushed: BenchFanOutCommand.sample("livedispatch_pushes_total", labels: #"outcome="delivered""#, in: metrics),
            inProgress: BenchFanOutCommand.sample("livedispatch_records_in_progress", labels: "", in: metrics),
            paused: BenchFanOutCommand.sample("livedispatch_consumer_paused", labels: "", in: metrics) > 0,
            routingPaused: BenchFanOutCommand.sample("livedispatch_router_paused", labels: "", in: metrics) > 0,
            cpuSeconds: BenchFanOutCommand.sample("process_cpu_seconds_total", labels: "", in: metrics))
    }
}

/// Writes a line to standard output at once, also when it is a file
/// (where `print` would hold it in a buffer until the run ends).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
