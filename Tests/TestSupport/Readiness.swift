import Foundation
import LiveDispatchCore

/// One answer of a worker's admin endpoint.
public struct AdminAnswer: Sendable {
    public var status: Int
    public var body: String
}

/// `GET path` on a worker's admin endpoint; nil while nothing listens there.
public func adminGet(port: Int, _ path: String) throws -> AdminAnswer? {
    let result = try runProcess(
        ["-s", "-o", "-", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)\(path)"], executable: URL(fileURLWithPath: "/usr/bin/curl"))
    guard result.status == 0, let newline = result.standardOutput.lastIndex(of: "\n"),
          let status = Int(result.standardOutput[result.standardOutput.index(after: newline)...]) else { return nil }
    return AdminAnswer(status: status, body: String(result.standardOutput[..<newline]))
}

/// What a worker's admin endpoint says of its readiness: `/readyz`'s status
/// code, `/status`'s phase and owned partitions.
public struct WorkerReadiness: Sendable, Equatable, CustomStringConvertible {
    public var ready: Int
    public var phase: String
    public var partitions: [Int]
    public var description: String { "\(ready) \(phase) \(partitions)" }

    public init(ready: Int, phase: String, partitions: [Int]) {
        self.ready = ready
        self.phase = phase
        self.partitions = partitions
    }

    /// Asks the worker whose admin endpoint is on `port`; nil while it does not answer.
    public static func of(port: Int) throws -> WorkerReadiness? {
        guard let ready = try adminGet(port: port, "/readyz"), let status = try adminGet(port: port, "/status"),
              let json = try? JSONValue.parse(status.body) else { return nil }
        return WorkerReadiness(
            ready: ready.status, phase: json["phase"]?.stringValue ?? "",
            partitions: json["partitions"]?.arrayValue?.compactMap { $0.integerValue.map(Int.init) } ?? [])
    }
}

/// Waits until the worker whose admin endpoint is on `port` answers
/// `/readyz` with 200, and returns what it says of itself then.
@discardableResult
public func waitUntilReady(port: Int, timeout: Duration = .seconds(120)) async throws -> WorkerReadiness {
    try await waitFor("the worker on port \(port) to be ready", timeout: timeout) {
        guard let readiness = try WorkerReadiness.of(port: port), readiness.ready == 200 else { return nil }
        return readiness
    }
}
