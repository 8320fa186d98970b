import Foundation

/// scripts/otlp-receiver.py as a child process: an OTLP/HTTP endpoint that
/// decodes each export with the opentelemetry-proto package (from
/// scripts/bootstrap's venv) and writes one JSON line per span.
public final class OTLPReceiver: Sendable {
    /// The venv's Python, which has opentelemetry-proto.
    public static let python = TestPaths.repositoryRoot.appendingPathComponent(".build/venv/bin/python3")

    /// One decoded span, with ids as lowercase hex (empty for none).
    public struct Span: Decodable, Sendable {
        public struct Link: Decodable, Sendable {
            public var trace_id: String
            public var span_id: String
            public var trace_state: String
            public var flags: Int
        }

        public struct Status: Decodable, Sendable {
            public var code: String
            public var message: String
        }

        public var trace_id: String
        public var span_id: String
        public var parent_span_id: String
        public var trace_state: String
        public var flags: Int
        public var name: String
        public var kind: String
        public var start: UInt64
        public var end: UInt64
        public var attributes: [String: AttributeValue]
        public var links: [Link]
        public var status: Status
        public var resource: [String: AttributeValue]
        public var scope: String
    }

    /// An attribute's value as the receiver wrote it in JSON.
    public enum AttributeValue: Decodable, Sendable, Hashable {
        case string(String)
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case array([AttributeValue])

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else {
                self = .array(try container.decode([AttributeValue].self))
            }
        }
    }

    public let process: BackgroundProcess
    public let port: Int
    public let output: URL

    /// Starts the receiver on a free port, writing into `directory`.
    public init(in directory: URL) async throws {
        output = directory.appendingPathComponent("spans.jsonl")
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            throw TestSetupError("\(Self.python.path) is missing: run scripts/bootstrap (it installs opentelemetry-proto)")
        }
        process = try BackgroundProcess(
            [TestPaths.repositoryRoot.appendingPathComponent("scripts/otlp-receiver.py").path, "--out", output.path],
            executable: Self.python)
        let line = try await process.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("listening: ") }
        port = Int(line.dropFirst("listening: ".count)) ?? 0
    }

    /// The traces URL to post to.
    public var endpoint: String { "http://127.0.0.1:\(port)/v1/traces" }

    /// Every span received so far.
    public func spans() throws -> [Span] {
        guard let text = try? String(contentsOf: output, encoding: .utf8) else { return [] }
        let decoder = JSONDecoder()
        return try text.split(separator: "\n").map { try decoder.decode(Span.self, from: Data($0.utf8)) }
    }
}
