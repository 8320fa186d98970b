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

/// A raw TCP connection to a local port, for clients that misbehave on
/// purpose: idle ones, slow ones, too many.
final class RawConnection {
    let descriptor: Int32

    init(port: Int) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw WaitTimeout(what: "a socket (errno \(errno))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(clamping: port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(descriptor)
            throw WaitTimeout(what: "a connection to port \(port) (errno \(errno))")
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Writes all of `text`; false when the server already closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            sent += written
        }
        return true
    }

    /// What a non-blocking read finds now.
    enum Read { case data([UInt8]), closed, nothing }

    func readNow() -> Read {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count > 0 { return .data(Array(buffer[..<count])) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .closed
    }

    /// Waits until the server closes the connection, reading and dropping what it sends.
    func waitUntilClosed(timeout: Duration) async throws {
        _ = try await waitFor("the server to close the connection", timeout: timeout) { () -> Bool? in
            while true {
                switch readNow() {
                case .closed: return true
                case .nothing: return nil
                case .data: continue
                }
            }
        }
    }

    /// Waits for a whole response head and returns what arrived so far.
    func waitForResponse(timeout: Duration) async throws -> String {
        var received: [UInt8] = []
        return try await waitFor("a response", timeout: timeout) { () -> String? in
            while case .data(let bytes) = readNow() { received += bytes }
            let text = String(decoding: received, as: UTF8.self)
            return text.contains("\r\n\r\n") ? text : nil
        }
    }
}

/// The number of file descriptors process `pid` has open.
func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
}

extension WorkerStack {
    /// Starts a worker whose HTTP server listens on a free port, with `extra`
    /// (YAML, e.g. an `http:` section) added to its configuration; waits
    /// until it restored `partitions` partitions (all by default).
    func startHTTPWorker(extra: String, restoring partitions: Int? = nil) async throws -> (port: Int, worker: BackgroundProcess) {
        let port = try freePort()
        let worker = try await startWorker(configuration: try writeConfiguration(adminPort: port, extra: extra), restoring: partitions)
        return (port, worker)
    }
}
