import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `scripts/webhook-receiver.py` as a process: it checks each request's
/// signature with Python's hmac and records what it received.
public final class WebhookReceiver: Sendable {
    public struct Request: Decodable, Sendable {
        public var id: String
        public var timestamp: String
        public var signature_valid: Bool
        public var content_type: String
        public var body: String
        public var answered: Int?
    }

    public let process: BackgroundProcess
    public let port: Int
    public let output: URL

    public init(secret: String, arguments: [String] = []) async throws {
        let directory = try TestPaths.temporaryDirectory("webhook-receiver")
        output = directory.appendingPathComponent("requests.jsonl")
        process = try BackgroundProcess(
            ["python3", TestPaths.repositoryRoot.appendingPathComponent("scripts/webhook-receiver.py").path, "--secret", secret,
             "--out", output.path] + arguments,
            executable: URL(fileURLWithPath: "/usr/bin/env"))
        let line = try await process.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("listening: ") }
        port = Int(line.dropFirst("listening: ".count)) ?? 0
    }

    public func requests() throws -> [Request] {
        guard let text = try? String(contentsOf: output, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { try JSONDecoder().decode(Request.self, from: Data($0.utf8)) }
    }

    public func stop() async throws { _ = try await process.stop(signal: SIGKILL) }
}

