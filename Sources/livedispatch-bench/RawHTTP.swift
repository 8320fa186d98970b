import Foundation
import LiveDispatchTesting
#if canImport(Glibc)
import Glibc
#endif

/// Bytes to and from a TCP port, exactly as given: requests no HTTP client
/// would send (any path spelling, any Host, broken framing, a head that
/// never ends), for `bench http-attack`.
final class RawSocket {
    let descriptor: Int32

    /// Connects to `host:port` (IPv4 or IPv6 literal, or a name getaddrinfo
    /// resolves). With `waiting` false the connection is only begun (the
    /// handshake goes on in the kernel), as a flood of idle clients does.
    init(host: String, port: Int, timeout: Duration = .seconds(10), waiting: Bool = true, source: String? = nil) throws {
        descriptor = try openTCPSocket(host: host, port: port, timeout: timeout, waiting: waiting, source: source)
    }

    /// Whether the peer has closed (or reset) the connection, without blocking.
    var peerClosed: Bool {
        var polled = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&polled, 1, 0) > 0 else { return false }
        if polled.revents & Int16(POLLERR | POLLHUP) != 0 { return true }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    deinit { close(descriptor) }

    /// How many of `sockets` have completed their handshake now.
    static func established(_ sockets: [RawSocket]) -> Int {
        var polled = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLOUT), revents: 0) }
        _ = poll(&polled, nfds_t(polled.count), 0)
        return polled.filter { $0.revents & Int16(POLLOUT) != 0 && $0.revents & Int16(POLLERR | POLLHUP) == 0 }.count
    }

    /// Writes all of `bytes`; false once the peer closed.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            sent += written
        }
        return true
    }

    /// Writes what the socket takes now without waiting; false once the peer closed.
    func sendNow(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } >= 0 || errno == EAGAIN
    }

    /// Waits until one of `sockets` is closed or has something to read, or `timeout` passes.
    static func waitForAnyClosed(_ sockets: [RawSocket], timeout: Duration) {
        var polled = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        _ = poll(&polled, nfds_t(polled.count), Int32(timeout / .milliseconds(1)))
    }

    /// Reads until the peer closes, the receive timeout passes, or `enough` says the bytes so far are a whole answer.
    func receive(until enough: ([UInt8]) -> Bool = { _ in false }) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (received, true) }
            if count < 0 { return (received, errno != EAGAIN && errno != EWOULDBLOCK) }
            received += buffer[..<count]
            if enough(received) { return (received, false) }
        }
    }
}

/// One HTTP/1.1 answer as read off a socket.
struct RawAnswer: Sendable {
    var status: Int
    /// Header names lowercased.
    var headers: [String: String]
    var body: String

    /// Parses the first answer in `bytes`, or nil when its head is not all there.
    init?(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let lines = text[..<split.lowerBound].split(separator: "\r\n")
        status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        headers = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        body = String(text[split.upperBound...])
    }

    /// Whether `bytes` hold a whole answer (its head and `Content-Length` bytes of body).
    static func isComplete(_ bytes: [UInt8]) -> Bool {
        guard let answer = RawAnswer(bytes) else { return false }
        guard let length = answer.headers["content-length"].flatMap({ Int($0) }) else { return answer.headers["transfer-encoding"] == nil }
        return answer.body.utf8.count >= length
    }

    /// Sends `request` on a new connection and reads its answer (status 0 when none came).
    static func exchange(host: String, port: Int, _ request: String, timeout: Duration = .seconds(10), source: String? = nil) throws -> RawAnswer {
        let socket = try RawSocket(host: host, port: port, timeout: timeout, source: source)
        socket.send(Array(request.utf8))
        let (bytes, _) = socket.receive(until: isComplete)
        return RawAnswer(bytes) ?? RawAnswer(status: 0, headers: [:], body: "")
    }

    init(status: Int, headers: [String: String], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
