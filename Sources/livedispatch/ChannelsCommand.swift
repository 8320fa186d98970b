import APNs
import ArgumentParser
import Foundation
import LiveDispatchCore
import LiveDispatchWorker
import Logging

/// `livedispatch channels create|list|get|delete`: the app's broadcast
/// channels (iOS 18) on APNs' channel management API, with the key,
/// bundle id and endpoint of a worker configuration.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, read and delete the app's broadcast channels on APNs.",
        discussion: """
            Uses the app's key, team, key id and bundle id (the apns section, or the app --app names under \
            apps:) and apns.trust_roots. With the endpoint production or sandbox it talks to \
            api-manage-broadcast[.sandbox].push.apple.com (ports 2196 and 2195) as --environment says; with \
            host:port (apns.endpoint, or the app's endpoints), to that address (a simulator). \
            An app keeps at most 10,000 channels per environment: delete those whose activity is over.
            """,
        subcommands: [Create.self, List.self, Get.self, Delete.self])

    /// The configuration and environment every subcommand uses.
    struct Target: ParsableArguments {
        @Option(name: .shortAndLong, help: "Configuration file (its apns section).") var config = "Config/livedispatch.yaml"
        @Option(help: "production or sandbox (default: the app's environment).") var environment: String?
        @Option(help: "The app (of apps:) whose channels these are; needed when there are several.") var app: String?

        func validate() throws {
            if let environment, APNsEnvironment(rawValue: environment) == nil {
                throw ValidationError("--environment: expected production or sandbox, got \(environment.debugDescription)")
            }
        }

        /// Runs `body` with a client of the configured app, then closes its connection.
        func withClient<Result: Sendable>(
            _ body: (BroadcastChannelClient) async throws(BroadcastChannelError) -> Result
        ) async throws -> Result {
            let configuration: WorkerConfiguration
            do {
                configuration = try WorkerConfiguration.load(path: config)
            } catch {
                fail("the configuration is not valid:\n\(error)")
            }
            var logger = Logger(label: "livedispatch.channels") { StreamLogHandler.standardError(label: $0) }
            logger.logLevel = .error
            let client: BroadcastChannelClient
            let pool: APNsConnectionPool
            do {
                let chosenApp = try Worker.app(configuration, named: app)
                let chosen = environment.flatMap(APNsEnvironment.init(rawValue:)) ?? chosenApp.environment
                (client, pool) = try Worker.makeChannelClient(configuration, app: chosenApp, environment: chosen, logger: logger)
            } catch {
                fail("\(error)")
            }
            let result: Result
            do {
                result = try await body(client)
            } catch {
                await pool.shutdown()
                fail(error.message)
            }
            await pool.shutdown()
            return result
        }

        private func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("error: \(message)\n".utf8))
            Foundation.exit(ExitCode.failure.rawValue)
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a Live Activity channel and print its id.")

        @OptionGroup var target: Target
        @Option(
            name: .customLong("storage-policy"),
            help: "Message storage policy: 0 or no-storage (deliver now or never), 1 or most-recent (keep the newest).")
        var storagePolicy = "no-storage"

        func validate() throws {
            do {
                _ = try ChannelStoragePolicy(parsing: storagePolicy)
            } catch {
                throw ValidationError("--storage-policy: \(error.message)")
            }
        }

        func run() async throws {
            let policy = try ChannelStoragePolicy(parsing: storagePolicy)
            let channelID = try await target.withClient { client throws(BroadcastChannelError) in
                try await client.create(storagePolicy: policy)
            }
            print(channelID)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the app's channel ids, one a line.")

        @OptionGroup var target: Target

        func run() async throws {
            let channels = try await target.withClient { client throws(BroadcastChannelError) in try await client.list() }
            for channelID in channels { print(channelID) }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a channel's storage policy and push type as JSON.")

        @OptionGroup var target: Target
        @Argument(help: "The channel id, as create printed it.") var channelID: String

        func run() async throws {
            let channelID = self.channelID
            let info = try await target.withClient { client throws(BroadcastChannelError) in
                try await client.read(channelID: channelID)
            }
            let json = JSONValue.object([
                "channel_id": .string(info.channelID), "message_storage_policy": .integer(Int64(info.storagePolicy.rawValue)),
                "push_type": .string(info.pushType),
            ])
            print(String(decoding: json.serialized(), as: UTF8.self))
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel; its subscribers get no more broadcasts.")

        @OptionGroup var target: Target
        @Argument(help: "The channel id, as create or list printed it.") var channelID: String

        func run() async throws {
            let channelID = self.channelID
            try await target.withClient { client throws(BroadcastChannelError) in try await client.delete(channelID: channelID) }
            print("deleted \(channelID)")
        }
    }
}
