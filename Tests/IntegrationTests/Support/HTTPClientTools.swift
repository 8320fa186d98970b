import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One answer of the worker's HTTP server, as curl saw it.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String
}

/// Sends one request with curl (`Expect:` off, so bodies go at once) and
/// returns the status, headers (lowercased names) and body.
func httpRequest(
    _ method: String, port: Int, _ path: String, headers: [String: String] = [:], body: String? = nil
) throws -> HTTPAnswer {
    var arguments = ["-s", "-S", "-i", "-X", method, "--max-time", "20", "-H", "Expect:"]
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
    if body != nil { arguments += ["--data-binary", "@-"] }
    arguments.append("http://127.0.0.1:\(port)\(path)")
    let result = try runProcess(arguments, executable: URL(fileURLWithPath: "/usr/bin/curl"), standardInput: body ?? "")
    guard let split = result.standardOutput.range(of: "\r\n\r\n") else {
        throw WaitTimeout(what: "an HTTP answer from \(method) \(path); curl said \(result.standardError)")
    }
    let head = result.standardOutput[..<split.lowerBound].split(separator: "\r\n")
    let status = head.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    var fields: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return HTTPAnswer(status: status, headers: fields, body: String(result.standardOutput[split.upperBound...]))
}

/// The number of file descriptors process `pid` has open.
func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
}

extension WorkerStack {
    /// Starts a worker whose HTTP server listens on a free port, with `extra`
    /// (YAML, e.g. an `http:` section) added to its configuration; waits
    /// until it restored `partitions` partitions (all by default).
    func startHTTPWorker(extra: String, probePort: Int? = nil, restoring partitions: Int? = nil) async throws -> (port: Int, worker: BackgroundProcess) {
        let port = try freePort()
        let worker = try await startWorker(configuration: try writeConfiguration(adminPort: port, probePort: probePort, extra: extra), restoring: partitions)
        return (port, worker)
    }
}
