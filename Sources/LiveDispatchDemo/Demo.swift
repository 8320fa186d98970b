import LiveDispatchWorker
import ServiceLifecycle

/// The demo around a worker (`livedispatch run`, `make run`): the APNs
/// simulator `apns.endpoint: simulator` names, started in the worker's
/// process; with a console, each push's Lock Screen and every dead letter
/// printed as they happen; with a replay, scenario files published once the
/// worker is ready.
public struct Demo: Sendable {
    /// Scenario files to publish while running (`Config/examples`).
    public var replay: String?
    /// Stop the worker once the replay is published and everything it caused is done.
    public var exitAfterReplay: Bool
    /// Where the demo's lines go; nil prints nothing.
    public var console: (@Sendable (String) -> Void)?
    public var simulator: InProcessSimulator.Options

    public init(
        replay: String? = nil, exitAfterReplay: Bool = false, console: (@Sendable (String) -> Void)? = nil,
        simulator: InProcessSimulator.Options = .init()
    ) {
        self.replay = replay
        self.exitAfterReplay = exitAfterReplay
        self.console = console
        self.simulator = simulator
    }

    /// What the worker is given to run the demo: its simulator, its
    /// console's observer and its replay service.
    public func workerOptions() -> Worker.Options {
        let printer = console.map { ConsolePrinter(write: $0) }
        var options = Worker.Options(inProcessAPNs: InProcessSimulator.factory(simulator))
        if let printer {
            options.observer = { observation in printer.observe(observation) }
        }
        if let replay {
            let exitWhenDone = exitAfterReplay
            options.services.append { parts in
                let scenario: Scenario
                do { scenario = try Scenario.load(path: replay) } catch { throw WorkerStartError("\(error)") }
                let replayer = ScenarioReplayer(
                    scenario: scenario, configuration: parts.configuration, producer: parts.producer, dispatcher: parts.dispatcher,
                    exitWhenDone: exitWhenDone, console: printer, logger: parts.logger)
                // When the replay ends, the whole worker shuts down gracefully.
                return .init(service: replayer, successTerminationBehavior: .gracefullyShutdownGroup)
            }
        }
        return options
    }
}
