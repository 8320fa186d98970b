import Foundation
import Kafka
import LiveDispatchCore
import LiveDispatchWorker
import Logging
import ServiceLifecycle

/// Publishes a scenario's records at their times once the worker is ready;
/// with `exitWhenDone`, returns once everything they caused is done, which
/// shuts the worker down.
final class ScenarioReplayer: Service, Sendable {
    let scenario: Scenario
    let configuration: WorkerConfiguration
    let producer: KafkaProducer
    let dispatcher: Dispatcher
    let exitWhenDone: Bool
    let console: ConsolePrinter?
    let logger: Logger

    init(
        scenario: Scenario, configuration: WorkerConfiguration, producer: KafkaProducer, dispatcher: Dispatcher,
        exitWhenDone: Bool, console: ConsolePrinter?, logger: Logger
    ) {
        self.scenario = scenario
        self.configuration = configuration
        self.producer = producer
        self.dispatcher = dispatcher
        self.exitWhenDone = exitWhenDone
        self.console = console
        self.logger = logger
    }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            // Wait until partitions are assigned and restored.
            while !(self.dispatcher.isReady && !self.dispatcher.status.partitions.isEmpty) {
                try await Task.sleep(for: .milliseconds(50))
            }
            self.console?.restartClock()
            self.console?.note("replaying \(self.scenario.steps.count) records")
            let start = ContinuousClock.now
            for step in self.scenario.steps {
                try await Task.sleep(until: start + .milliseconds(Int(saturating: step.after * 1000)), clock: .continuous)
                let topic: String
                switch step.destination {
                case .domain(let name): topic = name
                case .internalTopic(let internalTopic): topic = self.configuration.topic(internalTopic)
                }
                let now = UnixTime(seconds: Date().timeIntervalSince1970)
                try await self.producer.send(topic: topic, key: step.key.map { Array($0.utf8) }, value: step.renderedValue(now: now))
                self.console?.published(step)
            }
            guard self.exitWhenDone else {
                try await gracefulShutdown()
                return
            }
            // Done when nothing is in progress for a quiet spell longer than the coalescing delay.
            let quiet = Duration.milliseconds(Int(saturating: (self.configuration.coalesce.maxDelay + 0.5) * 1000))
            var idleSince: ContinuousClock.Instant?
            while true {
                try await Task.sleep(for: .milliseconds(50))
                if self.dispatcher.isIdle && self.producer.outstandingRecords == 0 {
                    let since = idleSince ?? .now
                    idleSince = since
                    if ContinuousClock.now - since >= quiet { break }
                } else {
                    idleSince = nil
                }
            }
            self.console?.note("replay done; shutting down")
        }
    }
}
