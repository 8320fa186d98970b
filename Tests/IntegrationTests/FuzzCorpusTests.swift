import Foundation
import Testing

/// The fuzz targets' seed corpora (and every input a fuzzing run ever
/// found, once added there) replayed through the plain build of
/// `livedispatch-fuzz`, and a few seconds of mutations: cheap enough for
/// every `make test` (`make fuzz` runs libFuzzer for longer).
@Suite("Fuzz corpora replay")
struct FuzzCorpusTests {
    @Test("every corpus input runs through its target without a crash or a failed invariant",
          arguments: ["json", "command", "registration", "expression", "rules", "config", "apns", "tracing"])
    func replay(target: String) throws {
        let corpus = TestPaths.repositoryRoot.appendingPathComponent("Fuzz/corpus/\(target)")
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(!files.isEmpty)
        let result = try runProcess(
            [target, corpus.path], executable: TestPaths.productsDirectory.appendingPathComponent("livedispatch-fuzz"))
        #expect(result.status == 0, "\(result.standardError.suffix(2000))")
        #expect(result.standardOutput == "\(target): \(files.count) inputs ran\n")
    }

    @Test("mutations of the corpus inputs, three seconds per target, run without a crash or a failed invariant",
          arguments: ["json", "command", "registration", "expression", "rules", "config", "apns", "tracing"])
    func mutate(target: String) throws {
        let corpus = TestPaths.repositoryRoot.appendingPathComponent("Fuzz/corpus/\(target)")
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let lastInput = directory.appendingPathComponent("last-input")
        let result = try runProcess(
            [target, corpus.path, "--mutate", "3", "--seed", "\(seed)", "--last-input", lastInput.path],
            executable: TestPaths.productsDirectory.appendingPathComponent("livedispatch-fuzz"))
        let input = (try? Data(contentsOf: lastInput)) ?? Data()
        #expect(
            result.status == 0,
            """
            seed \(seed); the input that failed (base64 of its first 4096 bytes, \(input.count) in all): \
            \(input.prefix(4096).base64EncodedString())
            \(result.standardError.suffix(2000))
            """)
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == 2 && lines[1].hasPrefix("\(target): ") && lines[1].hasSuffix(", seed \(seed)"), "\(result.standardOutput)")
        let count = lines.count == 2 ? Int(lines[1].split(separator: " ")[1]) ?? 0 : 0
        #expect(count > 100, "only \(count) mutated inputs ran in three seconds")
    }
}
