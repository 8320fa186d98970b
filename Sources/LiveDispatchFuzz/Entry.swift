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
/// seed corpora and every past finding stay regression tests. With
/// `--mutate SECONDS` it then feeds the target mutations of those files
/// (see ``Mutator``) until the time is up; `--seed N` repeats a run, and
/// `--last-input FILE` keeps each input in FILE before it runs, so the one
/// that crashed the process is there afterwards.
@main
struct ReplayCorpus {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var mutateSeconds: Double?
        var seed = DispatchTime.now().uptimeNanoseconds ^ UInt64(truncatingIfNeeded: getpid())
        var lastInputPath: String?
        while let flag = arguments.firstIndex(where: { $0.hasPrefix("--") }) {
            let value = flag + 1 < arguments.count ? arguments[flag + 1] : ""
            switch arguments[flag] {
            case "--mutate": mutateSeconds = Double(value).flatMap { $0 > 0 && $0 <= 86_400 ? $0 : nil }
            case "--seed": seed = UInt64(value) ?? seed // not from a Double: parsed from text, nil when it does not fit
            case "--last-input": lastInputPath = value.isEmpty ? nil : value
            default: usage()
            }
            if arguments[flag] == "--mutate" && mutateSeconds == nil { usage() }
            arguments.removeSubrange(flag..<min(arguments.count, flag + 2))
        }
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else { usage() }
        var corpus: [[UInt8]] = []
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
                corpus.append(Array(data))
            }
        }
        let lastInput = lastInputPath.flatMap { path in
            FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil
        }
        if lastInputPath != nil && lastInput == nil {
            FileHandle.standardError.write(Data("\(lastInputPath ?? ""): cannot be written\n".utf8))
            exit(73)
        }
        func run(_ input: [UInt8]) {
            if let lastInput {
                try? lastInput.truncate(atOffset: 0)
                try? lastInput.write(contentsOf: input)
            }
            target.run(input)
        }
        for input in corpus { run(input) }
        print("\(target.rawValue): \(corpus.count) inputs ran")
        guard let mutateSeconds, !corpus.isEmpty else { return }
        var mutator = Mutator(seed: seed)
        let started = Date()
        var count = 0
        while Date().timeIntervalSince(started) < mutateSeconds {
            let input = corpus[mutator.below(corpus.count)]
            run(mutator.mutate(input, other: corpus[mutator.below(corpus.count)]))
            count += 1
        }
        let elapsed = Date().timeIntervalSince(started)
        print("\(target.rawValue): \(count) mutated inputs in \(String(format: "%.1f", elapsed)) s, seed \(seed)")
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data(
            "usage: livedispatch-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE_OR_DIRECTORY… [--mutate SECONDS] [--seed N] [--last-input FILE]\n".utf8))
        exit(64)
    }
}
#endif
