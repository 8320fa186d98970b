import APNsSimulator
import Logging
import NIOCore
import NIOPosix
import NIOSSL
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import APNs

/// The socket options an APNs connection sets need no capability: Nagle off
/// at the TCP level, and no socket-level option (`SO_DEBUG`, number 1 like
/// `TCP_NODELAY`, needs `CAP_NET_ADMIN`, which a container does not have).
@Suite("APNs connection socket options")
struct SocketOptionTests {
    @Test("TCP_NODELAY is set at the TCP level and SO_DEBUG is not set")
    func nodelayWithoutDebug() async throws {
        let configuration = APNsSimulator.Configuration(
            teamID: testKey.teamID, keyID: testKey.keyID, publicKey: testKey.privateKey.publicKey,
            bundleID: "com.example.app", threads: 1)
        let logger = Logger(label: "socket-options") { _ in SwiftLogNoOpLogHandler() }
        let simulator = try await APNsSimulator.start(configuration: configuration, logger: logger)
        let roots = try NIOSSLCertificate.fromPEMBytes(Array(simulator.certificate.certificatePEM.utf8))
        let client = APNsClientConfiguration(
            endpoint: .init(host: "127.0.0.1", port: simulator.port, serverName: "localhost"), additionalTrustRoots: roots)
        let connection = try await APNsConnection.connect(
            id: 1, endpoint: client.endpoint, sslContext: try NIOSSLContext(configuration: client.makeTLSConfiguration()),
            connectTimeout: 5, pingTimeout: 5, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: logger,
            onEvent: { _ in }
        ).get()
        #expect(try await connection.channel.getOption(.tcpOption(.tcp_nodelay)).get() == 1)
        #expect(try await connection.channel.getOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_DEBUG))).get() == 0)
        try await connection.channel.close()
        try await simulator.stop()
    }
}
