import Foundation
import Testing

/// The container image's runtime stage installs every shared library the
/// `livedispatch` binary loads.
@Suite("Container image")
struct DeployImageTests {
    /// The Debian 13 package of each shared library outside the Swift runtime and glibc.
    static let packages: [String: String] = [
        "librdkafka.so.1": "librdkafka1",
        "libnghttp2.so.14": "libnghttp2-14",
        "libssl.so.3": "libssl3t64",
        "libcrypto.so.3": "libssl3t64",
        "libz.so.1": "zlib1g",
        "liblz4.so.1": "liblz4-1",
        "libzstd.so.1": "libzstd1",
        "libsasl2.so.2": "libsasl2-2",
        "libstdc++.so.6": "libstdc++6",
        "libgcc_s.so.1": "libgcc-s1",
    ]
    /// Part of every base image (libc6).
    static let glibc: Set<String> = ["linux-vdso.so.1", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"]

    /// Linked into the binary by `--static-swift-stdlib` in the image's build stage.
    static func isSwiftRuntime(_ library: String) -> Bool {
        ["libswift", "libFoundation", "lib_FoundationICU", "libdispatch", "libBlocksRuntime"].contains { library.hasPrefix($0) }
    }

    @Test("every library ldd lists for livedispatch is installed by the runtime stage or linked statically")
    func runtimeLibraries() throws {
        let ldd = try runProcess([TestPaths.livedispatch.path], executable: URL(fileURLWithPath: "/usr/bin/ldd"))
        #expect(ldd.status == 0, "\(ldd.standardError)")
        let libraries = ldd.standardOutput.split(separator: "\n").compactMap { line in
            line.split(separator: " ").first.map { String($0.split(separator: "/").last ?? $0).trimmingCharacters(in: .whitespaces) }
        }
        #expect(libraries.contains("librdkafka.so.1") && libraries.contains("libnghttp2.so.14"))

        let dockerfile = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("deploy/docker/Dockerfile"), encoding: .utf8)
        let stages = dockerfile.components(separatedBy: "\nFROM ")
        let build = try #require(stages.first { $0.contains("swift build") })
        let runtime = try #require(stages.last)
        let installed = Set(runtime.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\\" }).map(String.init))
        for library in libraries where !Self.glibc.contains(library) {
            if Self.isSwiftRuntime(library) {
                #expect(build.contains("--static-swift-stdlib"), "\(library) is not linked statically")
            } else if let package = Self.packages[library] {
                let listed = installed.contains(package)
                #expect(listed, "the runtime stage does not install \(package) for \(library)")
            } else {
                Issue.record("\(library) is needed but neither known nor installed: add its package to the Dockerfile and to this table")
            }
        }
    }
}
