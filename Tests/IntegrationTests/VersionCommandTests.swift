import Foundation
import Testing

@Suite("livedispatch as a process")
struct VersionCommandTests {
    @Test("--version prints the version and exits 0")
    func version() throws {
        let result = try runProcess(["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "0.1.0")
    }

    @Test("an unknown subcommand fails with a usage message")
    func unknownSubcommand() throws {
        let result = try runProcess(["no-such-command"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("no-such-command"))
    }
}
