import Foundation
import Glibc
import NIOCore
import NIOPosix
import NIOSSL
@testable import APNs
import APNsSimulator

/// A self-signed certificate for `localhost` and 127.0.0.1 (the simulator's
/// generator), written as PEM files in a fresh directory for servers that
/// read files (nghttpd).
struct TestCertificate {
    var directory: URL
    var certificatePath: String { directory.appendingPathComponent("cert.pem").path }
    var keyPath: String { directory.appendingPathComponent("key.pem").path }

    static func make() throws -> TestCertificate {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-tests-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = TestCertificate(directory: directory)
        let generated = try SimulatorCertificate.generate()
        try generated.certificatePEM.write(toFile: certificate.certificatePath, atomically: true, encoding: .utf8)
        try generated.privateKeyPEM.write(toFile: certificate.keyPath, atomically: true, encoding: .utf8)
        return certificate
    }

    /// Deletes the directory and everything in it.
    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    func trustRoots() throws -> [NIOSSLCertificate] {
        try NIOSSLCertificate.fromPEMFile(certificatePath)
    }
}


/// `nghttpd`, nghttp2's own HTTP/2 server, as a process serving a document
/// root where `/3/device/<token>` exists for the given tokens (so POSTs to
/// them answer 200, others 404).
final class NGHTTPDServer: Sendable {
    let port: Int
    let certificate: TestCertificate
    private let process: Process
    private let documentRoot: URL
    private let ownsCertificate: Bool

    init(tokens: [String], maxConcurrentStreams: Int? = nil, port: Int? = nil, certificate: TestCertificate? = nil) throws {
        self.certificate = try certificate ?? TestCertificate.make()
        ownsCertificate = certificate == nil
        self.port = try port ?? freePort()
        documentRoot = self.certificate.directory.appendingPathComponent("docroot-\(UUID().uuidString.prefix(6))")
        let deviceDirectory = documentRoot.appendingPathComponent("3/device")
        try FileManager.default.createDirectory(at: deviceDirectory, withIntermediateDirectories: true)
        for token in tokens {
            _ = FileManager.default.createFile(atPath: deviceDirectory.appendingPathComponent(token).path, contents: Data())
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpd")
        var arguments = ["-d", documentRoot.path, "--address=127.0.0.1"]
        if let maxConcurrentStreams { arguments.append("--max-concurrent-streams=\(maxConcurrentStreams)") }
        arguments += [String(self.port), self.certificate.keyPath, self.certificate.certificatePath]
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Waits until the server accepts TCP connections.
    func waitUntilListening(timeout: Double = 30) async throws {
        let port = self.port
        let listening = await eventually(timeout: timeout) {
            (try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port).get().close().get()) != nil
        }
        guard listening else { throw TestSetupError("nghttpd did not start listening on \(port)") }
    }

    /// Kills the server at once: its connections are reset. SIGKILL, because
    /// a child started from a test thread inherits a mask blocking SIGTERM.
    func kill() {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: documentRoot)
        if ownsCertificate { certificate.remove() }
    }

    deinit { if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGKILL) } }
}

/// A TLS server that negotiates `h2` and then never answers: requests to it
/// can only end by deadline.
final class SilentTLSServer: Sendable {
    let channel: any Channel
    let certificate: TestCertificate
    var port: Int { channel.localAddress?.port ?? 0 }

    init() throws {
        certificate = try TestCertificate.make()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate.certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificate.keyPath, format: .pem)))
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    func close() async throws {
        try await channel.close()
        certificate.remove()
    }
}
