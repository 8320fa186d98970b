import APNsSimulator
import Foundation
import Glibc
import Testing

/// `livedispatch-bench apns --compare-h2load` and `--compare-async-http-client`
/// as a process, against nghttpd: rounds of the client and of h2load or
/// AsyncHTTPClient sending the same requests, and the ratios between them.
@Suite("livedispatch-bench apns")
struct BenchAPNsCommandTests {
    static let token = String(repeating: "0b", count: 32)

    @Test func comparesTheClientWithH2loadSendingTheSameRequests() async throws {
        try await Self.withNghttpd { port, certificateFile in
            try Self.checkH2loadComparison(port: port, certificateFile: certificateFile)
        }
    }

    @Test func comparesTheClientWithAsyncHTTPClientSendingTheSameRequests() async throws {
        try await Self.withNghttpd { port, certificateFile in
            let result = try runBench([
                "apns", "--endpoint", "https://127.0.0.1:\(port)", "--server-name", "localhost",
                "--trust-roots", certificateFile.path, "--token", Self.token, "--connections", "2", "--requests", "300",
                "--rounds", "2", "--compare-async-http-client",
            ])
            #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n").map(String.init)
            for round in 1...2 {
                #expect(
                    lines.contains { $0.hasPrefix("round \(round): client ") && $0.contains(" pushes/s, AsyncHTTPClient ") && $0.hasSuffix(" pushes/s") },
                    "\(result.standardOutput)")
            }
            #expect(lines.contains("outcomes: delivered=600"), "\(result.standardOutput)")
            #expect(lines.contains("AsyncHTTPClient outcomes: delivered=600"), "\(result.standardOutput)")
            let prefix = "client / AsyncHTTPClient: "
            let line = try #require(lines.first { $0.hasPrefix(prefix) }, "\(result.standardOutput)")
            let ratio = try #require(Double(line.dropFirst(prefix.count).prefix { $0 != " " }), "\(line)")
            #expect(ratio > 0 && ratio < 100, "\(line)")
            #expect(line.contains("(rounds: "), "\(line)")
        }
    }

    @Test func refusesBatchesWithAsyncHTTPClient() throws {
        let result = try runBench([
            "apns", "--endpoint", "https://127.0.0.1:1", "--token", Self.token, "--insecure", "--compare-async-http-client", "--batch", "10",
        ])
        #expect(result.status != 0)
        #expect(result.standardError.contains("--compare-async-http-client sends one push per request: leave --batch at 1"), "\(result.standardError)")
    }

    /// nghttpd over TLS on a free port, serving an empty file at the
    /// device path of ``token``, for the length of `body`.
    static func withNghttpd(_ body: (_ port: Int, _ certificateFile: URL) async throws -> Void) async throws {
        let directory = try TestPaths.temporaryDirectory("bench-apns")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try SimulatorCertificate.generate()
        let certificateFile = directory.appendingPathComponent("cert.pem")
        let keyFile = directory.appendingPathComponent("key.pem")
        try certificate.certificatePEM.write(to: certificateFile, atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(to: keyFile, atomically: true, encoding: .utf8)
        let devices = directory.appendingPathComponent("docroot/3/device")
        try FileManager.default.createDirectory(at: devices, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: devices.appendingPathComponent(Self.token).path, contents: Data())

        let port = try freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpd")
        server.arguments = ["-d", directory.appendingPathComponent("docroot").path, "--address=127.0.0.1", String(port), keyFile.path, certificateFile.path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        // SIGKILL: a child started from a test thread inherits a mask blocking SIGTERM.
        defer {
            _ = Glibc.kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        let listening = await eventually(timeout: 30) { canConnect(port: port) }
        try #require(listening, "nghttpd did not listen on \(port)")
        try await body(port, certificateFile)
    }

    static func checkH2loadComparison(port: Int, certificateFile: URL) throws {
        let result = try runBench([
            "apns", "--endpoint", "https://127.0.0.1:\(port)", "--server-name", "localhost",
            "--trust-roots", certificateFile.path, "--token", Self.token, "--connections", "2", "--requests", "2000",
            "--rounds", "2", "--compare-h2load",
        ])
        #expect(result.status == 0, "\(result.standardOutput)\n\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        for round in 1...2 {
            #expect(
                lines.contains { $0.hasPrefix("round \(round): client ") && $0.contains(" pushes/s, h2load (same headers) ") && $0.hasSuffix(" requests/s") },
                "\(result.standardOutput)")
        }
        #expect(lines.contains("outcomes: delivered=4000"), "\(result.standardOutput)")
        for label in ["same headers", "minimal headers"] {
            let line = try #require(lines.first { $0.hasPrefix("client / h2load (\(label)): ") }, "\(result.standardOutput)")
            let ratio = try #require(Double(line.dropFirst("client / h2load (\(label)): ".count).prefix { $0 != " " }), "\(line)")
            #expect(ratio > 0 && ratio < 10, "\(line)")
            #expect(line.contains("(rounds: "), "\(line)")
        }
    }

    @Test func refusesAnH2loadThatIsNotThere() throws {
        let result = try runBench([
            "apns", "--endpoint", "https://127.0.0.1:1", "--token", Self.token, "--insecure",
            "--compare-h2load", "--h2load-path", "/nonexistent/h2load",
        ])
        #expect(result.status != 0)
        #expect(result.standardError.contains("/nonexistent/h2load is not an executable"), "\(result.standardError)")
    }
}

/// Whether a TCP connection to 127.0.0.1:`port` is accepted.
private func canConnect(port: Int) -> Bool {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return false }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
