import ArgumentParser
import Foundation
import Kafka
import LiveDispatchDemo
import LiveDispatchHTTP
import LiveDispatchTracing
import LiveDispatchWorker
import Logging
import Metrics
import Prometheus

/// `livedispatch run`: the worker.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the worker: route domain events through the rules and keep Live Activities current over APNs.",
        discussion: """
            Reads the configuration file (every key documented in it), applies LIVEDISPATCH_* \
            environment overrides, checks the topics and runs until SIGTERM or SIGINT, then shuts down \
            gracefully: stop consuming, finish in-flight pushes, commit, leave the group. \
            With kafka.bootstrap: embedded and apns.endpoint: simulator (the shipped defaults) it needs \
            nothing else running. --replay publishes scenario files (Config/examples) and prints what \
            each activity's Lock Screen shows as pushes complete; the worker then keeps running (the web \
            console, whose address it prints, shows the activities) until Ctrl-C, or stops once the \
            replay's work is done with --exit-after-replay.
            """
    )

    @Option(name: .shortAndLong, help: "Configuration file.")
    var config = "Config/livedispatch.yaml"

    @Option(help: "Scenario file or directory of *.jsonl files to publish while running.")
    var replay: String?

    @Flag(help: "With --replay: stop once the scenario is published and everything it caused is done.")
    var exitAfterReplay = false

    @Option(help: "With apns.endpoint: simulator, write every push the simulator accepts to this JSONL file.")
    var simulatorRecord: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: info; notice with --replay).")
    var logLevel: String?

    func validate() throws {
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level: expected trace, debug, info, notice, warning, error or critical, got \(logLevel.debugDescription)")
        }
    }

    func run() async throws {
        MallocTuning.apply(environment: ProcessInfo.processInfo.environment)
        let level = logLevel.flatMap(Logger.Level.init(rawValue:))
            ?? ProcessInfo.processInfo.environment["LIVEDISPATCH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
            ?? (replay == nil ? .info : .warning)
        // A line logged under a traced request or span names its trace_id and span_id.
        LoggingSystem.bootstrap({ label, provider in
            var handler = StreamLogHandler.standardError(label: label, metadataProvider: provider)
            handler.logLevel = level
            return handler
        }, metadataProvider: .tracing)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "livedispatch")

        let configuration: WorkerConfiguration
        do {
            configuration = try WorkerConfiguration.load(path: config)
        } catch {
            FileHandle.standardError.write(Data("error: the configuration is not valid:\n\(error)\n".utf8))
            throw ExitCode.failure
        }
        let printLine: @Sendable (String) -> Void = { line in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
        try await runWorker(configuration: configuration, registry: registry, logger: logger, printLine: printLine)
        // The worker is released: its Kafka clients are being destroyed on
        // their own threads, which must end before the process does.
        if await !KafkaClients.waitUntilDestroyed(timeout: .seconds(10)) {
            logger.warning("Kafka clients still open at exit")
        }
    }

    /// Starts the worker and runs it until it stops; returns once nothing
    /// holds it any more.
    private func runWorker(
        configuration: WorkerConfiguration, registry: PrometheusCollectorRegistry, logger: Logger,
        printLine: @escaping @Sendable (String) -> Void
    ) async throws {
        let console = replay == nil ? nil : printLine
        let worker: Worker
        do {
            worker = try await Worker.start(
                configuration: configuration,
                options: Demo(replay: replay, exitAfterReplay: exitAfterReplay, console: console, simulator: .init(recordFile: simulatorRecord)).workerOptions(),
                logger: logger,
                http: { components in
                    try WorkerHTTPServer(components: components, exposition: { registry.emitToBuffer() }) { port in
                        printLine("console: \(WorkerHTTPServer.consoleAddress(listen: components.configuration.admin.listen, port: port))")
                    }
                },
                waitingHTTP: { components in
                    try WorkerHTTPServer(waiting: components, exposition: { registry.emitToBuffer() })
                })
        } catch let stopped as WorkerStoppedBeforeStart {
            FileHandle.standardOutput.write(Data("livedispatch: \(stopped)\n".utf8))
            return
        } catch {
            FileHandle.standardError.write(Data("error: the worker cannot start: \(error)\n".utf8))
            throw ExitCode.failure
        }
        FileHandle.standardOutput.write(Data("livedispatch: running (kafka \(worker.bootstrapServers), group \(configuration.kafka.groupID))\n".utf8))
        try await worker.run()
    }
}
