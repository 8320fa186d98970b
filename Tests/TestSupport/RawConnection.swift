import Foundation
import LiveDispatchTesting
#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP connection to a local port, for clients that misbehave on
/// purpose: idle ones, slow ones, too many.
public final class RawConnection {
    public let descriptor: Int32

    /// Connects to `host` (an IPv4 or IPv6 literal) at `port`.
    public init(host: String = "127.0.0.1", port: Int) throws {
        do {
            descriptor = try openTCPSocket(host: host, port: port)
        } catch {
            throw WaitTimeout(what: "a connection to \(host) port \(port): \(error)")
        }
    }

    deinit { close(descriptor) }

    /// Writes all of `text`; false when the server already closed the connection.
    @discardableResult
    public func send(_ text: String) -> Bool {
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
    public enum Read { case data([UInt8]), closed, nothing }

    public func readNow() -> Read {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count > 0 { return .data(Array(buffer[..<count])) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .closed
    }

    /// Waits until the server closes the connection, reading and dropping what it sends.
    public func waitUntilClosed(timeout: Duration) async throws {
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
    public func waitForResponse(timeout: Duration) async throws -> String {
        var received: [UInt8] = []
        return try await waitFor("a response", timeout: timeout) { () -> String? in
            while case .data(let bytes) = readNow() { received += bytes }
            let text = String(decoding: received, as: UTF8.self)
            return text.contains("\r\n\r\n") ? text : nil
        }
    }
}

