import ArgumentParser
import LiveDispatchCore

/// The `livedispatch` command: the worker and the tools around it.
@main
struct LiveDispatchCommand: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "livedispatch",
        abstract: "Keeps iOS Live Activities current from Kafka events, over APNs.",
        version: version,
        subcommands: [RunCommand.self, PayloadCommand.self, RulesCommand.self, TypesCommand.self, KafkaCommand.self, SimulateCommand.self, DeadLettersCommand.self, ChannelsCommand.self]
    )
}
