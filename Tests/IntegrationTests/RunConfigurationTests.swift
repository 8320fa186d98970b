import Foundation
import Testing

/// `livedispatch run` with a bad configuration, as a process: refused before
/// anything starts, with positions, never echoing the file.
@Suite("livedispatch run refuses bad configuration")
struct RunConfigurationTests {
    static func run(_ yaml: String) throws -> (ProcessResult, String) {
        let directory = try TestPaths.temporaryDirectory("config")
        let file = directory.appendingPathComponent("livedispatch.yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        return (try runProcess(["run", "--config", file.path]), file.path)
    }

    @Test("a bad endpoint, key and timeout are all reported with file:line:column before Kafka or the simulator start")
    func validatedBeforeStarting() throws {
        let (result, file) = try Self.run("""
            apns:
              endpoint: "not a host::99999"
              request_timeout: 0s
            admin:
              listen: nowhere
            """)
        #expect(result.status == 1)
        #expect(result.standardError.contains("\(file):2:13: apns.endpoint: expected production, sandbox, simulator or host:port"), "\(result.standardError)")
        #expect(result.standardError.contains("\(file):3:20: apns.request_timeout: must be more than 0s"))
        #expect(result.standardError.contains("\(file):5:11: admin.listen: expected host:port"))
        #expect(!result.standardError.contains("embedded Kafka"))
        #expect(!result.standardError.contains("simulator with a generated key"))
    }

    @Test("a duplicate key is reported at its position without printing the file")
    func duplicateKey() throws {
        let (result, file) = try Self.run("""
            kafka:
              bootstrap: embedded
              properties:
                sasl.password: hunter2-secret
              bootstrap: embedded
            """)
        #expect(result.status == 1)
        #expect(result.standardError.contains("\(file):2:3: duplicate key 'bootstrap'"), "\(result.standardError)")
        #expect(!result.standardError.contains("hunter2"))
        #expect(!result.standardOutput.contains("hunter2"))
    }
}
