import Foundation
import Testing

/// The fuzz targets' seed corpora (and every input a fuzzing run ever
/// found, once added there) replayed through the plain build of
/// `livedispatch-fuzz`: cheap enough for every `make test`.
@Suite("Fuzz corpora replay")
struct FuzzCorpusTests {
    @Test("every corpus input runs through its target without a crash or a failed invariant",
          arguments: ["json", "command", "registration", "expression", "rules", "config", "apns"])
    func replay(target: String) throws {
        let corpus = TestPaths.repositoryRoot.appendingPathComponent("Fuzz/corpus/\(target)")
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(!files.isEmpty)
        let result = try runProcess(
            [target, corpus.path], executable: TestPaths.productsDirectory.appendingPathComponent("livedispatch-fuzz"))
        #expect(result.status == 0, "\(result.standardError.suffix(2000))")
        #expect(result.standardOutput == "\(target): \(files.count) inputs ran\n")
    }
}
