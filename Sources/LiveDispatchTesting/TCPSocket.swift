import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why a TCP connection could not be opened.
public struct TCPConnectError: Error, CustomStringConvertible {
    public var description: String
}

/// A TCP socket connected (or, with `waiting` false, being connected) to
/// `host` (an IPv4 or IPv6 literal, or a name getaddrinfo resolves) at
/// `port`; `timeout` bounds each blocking send and receive. `source` (an
/// address literal of the same family, e.g. `127.0.0.2`) is the address it
/// connects from. The caller closes it.
public func openTCPSocket(host: String, port: Int, timeout: Duration? = nil, waiting: Bool = true, source: String? = nil) throws(TCPConnectError) -> Int32 {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &list) == 0, let address = list else {
        throw TCPConnectError(description: "cannot resolve \(host)")
    }
    defer { freeaddrinfo(list) }
    let descriptor = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TCPConnectError(description: "no socket (errno \(errno))") }
    if let timeout {
        let (seconds, attoseconds) = timeout.components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000)) // not from a Double: Int64 components
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
    }
    if let source {
        var local: UnsafeMutablePointer<addrinfo>?
        var numeric = addrinfo()
        numeric.ai_flags = AI_NUMERICHOST
        numeric.ai_socktype = Int32(SOCK_STREAM.rawValue)
        guard getaddrinfo(source, "0", &numeric, &local) == 0, let local else {
            close(descriptor)
            throw TCPConnectError(description: "cannot read the source address \(source)")
        }
        defer { freeaddrinfo(local) }
        guard bind(descriptor, local.pointee.ai_addr, local.pointee.ai_addrlen) == 0 else {
            let reason = errno
            close(descriptor)
            throw TCPConnectError(description: "cannot bind to \(source) (errno \(reason))")
        }
    }
    if !waiting { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
    guard connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || (!waiting && errno == EINPROGRESS) else {
        let reason = errno
        close(descriptor)
        throw TCPConnectError(description: "cannot connect to \(host) port \(port) (errno \(reason))")
    }
    return descriptor
}
