import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A setup step of a test or a benchmark that could not be done (no free
/// port, a tool missing).
public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for
/// a socket bound to port 0), for a process that must be told its port.
public func freePort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestSetupError("no socket for a free port") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
        }
    }
    guard bound else { throw TestSetupError("no free port on 127.0.0.1") }
    return Int(UInt16(bigEndian: address.sin_port))
}
