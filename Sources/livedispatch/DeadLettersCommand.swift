import ArgumentParser
import Foundation
import NIOHTTP1
import PlainHTTP

/// `livedispatch dead-letters list|replay`: a worker's dead-letter routes
/// (`GET /v1/dead-letters`, `POST /v1/dead-letters/{id}/replay`) from the
/// command line.
struct DeadLettersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead-letters",
        abstract: "List dead letters and replay them (their original records, or a failed push's token registered again), through a worker's HTTP API.",
        subcommands: [List.self, Replay.self])

    /// Where the worker is and the key to use.
    struct Connection: ParsableArguments {
        @Option(help: "The worker's HTTP address (its admin.listen).") var url = "http://127.0.0.1:9464"
        @Option(help: "The API key (default: $LIVEDISPATCH_API_KEY); list needs the read scope, replay the admin scope.")
        var key: String?

        /// Sends one request; prints the body and fails unless the status is `expected`.
        func send(_ method: HTTPMethod, _ path: String, expected: Int) async throws {
            guard let base = URL(string: url), let target = URL(string: path, relativeTo: base) else {
                throw ValidationError("--url \(url.debugDescription) is not a URL")
            }
            var headers: [(String, String)] = []
            if let key = key ?? ProcessInfo.processInfo.environment["LIVEDISPATCH_API_KEY"] {
                headers.append(("Authorization", "Bearer \(key)"))
            }
            let response: PlainHTTPClient.Response
            do {
                response = try await PlainHTTPClient.send(method, target.absoluteString, headers: headers)
            } catch {
                FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                throw ExitCode.failure
            }
            print(response.text)
            let status = response.status
            guard status == expected else {
                FileHandle.standardError.write(Data("error: the worker answered \(status)\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the newest dead letters as JSON.")

        @OptionGroup var connection: Connection
        @Option(help: "Only this activity's.") var activity: String?
        @Option(help: "Only this reason (activity-ended, invalid-command, …).") var reason: String?
        @Option(help: "How many at most (1 to 500).") var limit = 50

        func run() async throws {
            var components = URLComponents()
            components.path = "/v1/dead-letters"
            components.queryItems = [
                activity.map { URLQueryItem(name: "activity", value: $0) }, reason.map { URLQueryItem(name: "reason", value: $0) },
                URLQueryItem(name: "limit", value: String(limit)),
            ].compactMap { $0 }
            guard let path = components.string else { throw ValidationError("the filters cannot be put in a URL") }
            try await connection.send(.GET, path, expected: 200)
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Produce a dead letter's original record again.")

        @OptionGroup var connection: Connection
        @Argument(help: "The dead letter's id, <partition>-<offset>, as listed.") var id: String

        func run() async throws {
            guard id.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-") }) else {
                throw ValidationError("\(id.debugDescription) is not a dead letter id (<partition>-<offset>)")
            }
            try await connection.send(.POST, "/v1/dead-letters/\(id)/replay", expected: 202)
        }
    }
}
