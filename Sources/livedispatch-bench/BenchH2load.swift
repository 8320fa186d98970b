import APNs
import Foundation

/// h2load, nghttp2's load generator, sending what `bench apns` sends: the
/// yardstick for the APNs client's cost per request.
///
/// `same` sends the request the client sends, header for header (the
/// provider token of the same key, priority, expiration, an `apns-id`,
/// content type and length, the same payload); h2load indexes values the
/// client marks never-indexed (`:path`, `apns-id`), so it still does a little
/// less. `minimal` sends only the path, topic, push type and payload: a
/// lighter request than any the client sends to APNs, for comparison with
/// earlier figures.
struct H2loadComparison {
    enum Headers { case same, minimal }

    let executable: String
    let url: String
    let directory: URL
    let payloadFile: URL
    let topic: String
    let authorization: String
    let connections: Int
    let requests: Int
    let streams: Int

    init(
        executable: String, endpoint: APNsClientConfiguration.Endpoint, token: String, bundleID: String, payload: [UInt8],
        authorization: String, connections: Int, requests: Int, streams: Int
    ) throws {
        self.executable = executable
        self.url = "https://\(endpoint.host):\(endpoint.port)/3/device/\(token)"
        self.topic = bundleID + ".push-type.liveactivity"
        self.authorization = authorization
        self.connections = connections
        self.requests = requests
        self.streams = streams
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedispatch-h2load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        payloadFile = directory.appendingPathComponent("payload.json")
        try Data(payload).write(to: payloadFile)
    }

    func removeFiles() { try? FileManager.default.removeItem(at: directory) }

    func arguments(_ headers: Headers) -> [String] {
        var fields = [("apns-push-type", "liveactivity"), ("apns-topic", topic)]
        if headers == .same {
            fields += [
                ("apns-priority", "10"), ("apns-expiration", "0"), ("apns-id", UUID().uuidString.lowercased()),
                ("content-type", "application/json"), ("authorization", authorization),
            ]
        }
        var arguments = ["-n", String(requests), "-c", String(connections), "-m", String(streams), "-d", payloadFile.path]
        for (name, value) in fields { arguments += ["-H", "\(name): \(value)"] }
        return arguments + [url]
    }

    /// Runs h2load once; its requests/s, or an error unless every request succeeded.
    func run(headers: Headers) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments(headers)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchError(description: "h2load exited with status \(process.terminationStatus): \(text.suffix(600))")
        }
        return try Self.rate(of: text, requests: requests)
    }

    /// The requests/s of h2load's `finished in` line, after checking its
    /// `requests:` and `status codes:` lines say every request succeeded with a 2xx.
    static func rate(of output: String, requests: Int) throws -> Double {
        let lines = output.split(separator: "\n")
        guard let counts = lines.first(where: { $0.hasPrefix("requests:") }) else {
            throw BenchError(description: "h2load printed no requests: line: \(output.suffix(600))")
        }
        let words = counts.split(separator: " ")
        guard let index = words.firstIndex(where: { $0.hasPrefix("succeeded") }), index > 0, let succeeded = Int(words[index - 1]) else {
            throw BenchError(description: "h2load's requests: line has no succeeded count: \(counts)")
        }
        guard succeeded == requests else {
            throw BenchError(description: "h2load: \(succeeded) of \(requests) requests succeeded (\(counts))")
        }
        // A refusal (a 4xx from a server that checks the headers) completes
        // as a request too: only 2xx answers count.
        guard let statuses = lines.first(where: { $0.hasPrefix("status codes:") }),
            let answered = statuses.split(separator: " ").dropFirst(2).first.flatMap({ Int($0) }), answered == requests
        else {
            throw BenchError(description: "h2load: not every request was answered 2xx (\(lines.first { $0.hasPrefix("status codes:") } ?? "no status codes line"))")
        }
        guard let finished = lines.first(where: { $0.hasPrefix("finished in") }),
            let field = finished.split(separator: ",").first(where: { $0.hasSuffix(" req/s") }),
            let rate = Double(field.dropLast(" req/s".count).trimmingCharacters(in: .whitespaces)), rate.isFinite, rate > 0
        else {
            throw BenchError(description: "h2load printed no rate: \(output.suffix(600))")
        }
        return rate
    }
}
