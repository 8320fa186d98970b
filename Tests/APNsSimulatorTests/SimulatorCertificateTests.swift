import Foundation
import NIOSSL
import Testing

@testable import APNsSimulator

@Suite("Self-signed simulator certificate")
struct SimulatorCertificateTests {
    @Test("the generated certificate and key load into NIOSSL as a server identity")
    func loadsIntoNIOSSL() throws {
        let certificate = try SimulatorCertificate.generate()
        #expect(certificate.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(certificate.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let chain = try NIOSSLCertificate.fromPEMBytes(Array(certificate.certificatePEM.utf8))
        #expect(chain.count == 1)
        let key = try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.applicationProtocols = ["h2"]
        _ = try NIOSSLContext(configuration: configuration)
    }

    @Test("OpenSSL verifies the certificate as its own trust root, for localhost and 127.0.0.1")
    func opensslVerifies() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simcert-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cert.pem")
        try SimulatorCertificate.generate().certificatePEM.write(to: file, atomically: true, encoding: .utf8)
        for extra in [["-verify_hostname", "localhost"], ["-verify_ip", "127.0.0.1"]] {
            let result = try runOpenSSL(["verify", "-purpose", "sslserver", "-CAfile", file.path] + extra + [file.path])
            #expect(result.status == 0, "openssl verify \(extra): \(result.output)")
            #expect(result.output.contains("OK"))
        }
        let wrongHost = try runOpenSSL(["verify", "-CAfile", file.path, "-verify_hostname", "example.com", file.path])
        #expect(wrongHost.status != 0)
    }

    @Test("DER pieces: lengths, integers and object identifiers")
    func der() {
        #expect(SelfSignedCertificateDER.length(5) == [5])
        #expect(SelfSignedCertificateDER.length(200) == [0x81, 200])
        #expect(SelfSignedCertificateDER.length(300) == [0x82, 0x01, 0x2C])
        #expect(SelfSignedCertificateDER.integer([0x80]) == [0x02, 0x02, 0x00, 0x80])
        #expect(SelfSignedCertificateDER.integer([0x00, 0x01]) == [0x02, 0x01, 0x01])
        #expect(SelfSignedCertificateDER.oid([1, 2, 840, 10045, 4, 3, 2]) == [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02])
        let y2049 = Date(timeIntervalSince1970: 2_524_608_000 - 1)  // 2049-12-31T23:59:59Z
        #expect(SelfSignedCertificateDER.time(y2049) == [0x17, 13] + Array("491231235959Z".utf8))
        let y2050 = Date(timeIntervalSince1970: 2_524_608_000)
        #expect(SelfSignedCertificateDER.time(y2050) == [0x18, 15] + Array("20500101000000Z".utf8))
    }

    private func runOpenSSL(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
