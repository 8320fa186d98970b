import Foundation

#if FUZZING
/// libFuzzer's entry for a program that has its own `main` (SwiftPM gives
/// every executable one): it parses libFuzzer's flags and runs the loop.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The target libFuzzer drives, from `LIVEDISPATCH_FUZZ_TARGET`.
let selectedTarget: FuzzTarget? = ProcessInfo.processInfo.environment["LIVEDISPATCH_FUZZ_TARGET"].flatMap(FuzzTarget.init(rawValue:))

/// One input, for libFuzzer.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selectedTarget?.run(bytes)
    return 0
}

/// Built with `-sanitize=fuzzer,address -DFUZZING` (scripts/fuzz): libFuzzer
/// runs the target named by `LIVEDISPATCH_FUZZ_TARGET` with its usual flags.
@main
struct Fuzz {
    static func main() {
        guard selectedTarget != nil else {
            FileHandle.standardError.write(Data("set LIVEDISPATCH_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue))\n".utf8))
            exit(64)
        }
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv, fuzzOne))
    }
}
#else
/// Without libFuzzer: `livedispatch-fuzz TARGET PATH…` runs every file
/// (directories are read one level deep) through a target once, so that the
/// seed corpora and every past finding stay regression tests.
@main
struct ReplayCorpus {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            FileHandle.standardError.write(Data("usage: livedispatch-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE_OR_DIRECTORY…\n".utf8))
            exit(64)
        }
        var count = 0
        for path in arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("\(path): no such file or directory\n".utf8))
                exit(66)
            }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                target.run(Array(data))
                count += 1
            }
        }
        print("\(target.rawValue): \(count) inputs ran")
    }
}
#endif
