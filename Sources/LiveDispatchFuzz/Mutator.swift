import LiveDispatchCore

/// Mutates corpus inputs without libFuzzer, so that every `make test` feeds
/// each target a few thousand new inputs on the plain build (no sanitizer,
/// no coverage feedback: bit flips, byte edits, chunk copies, splices of two
/// inputs and tokens known to reach edge cases). A run is reproducible from
/// its seed and the corpus.
struct Mutator {
    /// Longest input built, as in `scripts/fuzz` (`-max_len`).
    static let maxLength = 65_536

    /// Fragments that reach limits and edge cases of the parsers and
    /// evaluators: huge and odd numbers, escapes, nesting, expression and
    /// template operators, YAML indicators.
    static let tokens: [[UInt8]] = [
        "1e300", "-1e308", "9223372036854775808", "-0", "0.0000001", "NaN", "1E+2", "\"", "\\", "\\u0000", "\\ud800",
        "\\uDFFF", "null", "true", "{", "}", "[", "]", "{\"a\":", "[[[[[[[[", "]]]]]]]]", ",", ":", "now()",
        "duration(", "event.", " && ", " || ", " ?? ", " + ", "[0]", ".lower()", "{{", "}}", "*a", "&a ", "<<: ",
        "\n- ", "\n  ", ": |\n", "---\n", "#", "\t", "\r\n", "\u{FEFF}", "\u{00}", "é", "😀", "2001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z", "retry-after: 5", "apns-id: ", "{\"reason\":\"BadDeviceToken\"}", "429", "410",
        "\"timestamp\":1e300", "\"activity_id\":\"a\"", "\"content_state\":{}", "\"event\":\"end\"",
    ].map { Array($0.utf8) }

    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { random.next() }

    /// A number in 0 ..< bound (bound > 0).
    mutating func below(_ bound: Int) -> Int { random.below(bound) }

    /// One to four edits of `input`; `other` is another corpus input to splice with.
    mutating func mutate(_ input: [UInt8], other: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0...below(4) { edit(&bytes, other: other) }
        if bytes.count > Self.maxLength { bytes.removeLast(bytes.count - Self.maxLength) }
        return bytes
    }

    private mutating func edit(_ bytes: inout [UInt8], other: [UInt8]) {
        let position = below(bytes.count + 1)
        switch below(8) {
        case 0 where !bytes.isEmpty:
            let index = below(bytes.count)
            bytes[index] ^= UInt8(truncatingIfNeeded: 1 << below(8))
        case 1 where !bytes.isEmpty:
            bytes[below(bytes.count)] = UInt8(truncatingIfNeeded: next())
        case 2:
            bytes.insert(UInt8(truncatingIfNeeded: next()), at: position)
        case 3 where !bytes.isEmpty:
            let start = below(bytes.count)
            let end = min(bytes.count, start + 1 + below(16))
            bytes.removeSubrange(start..<end)
        case 4 where !bytes.isEmpty:
            // A chunk copied elsewhere, sometimes many times: long chains and deep nesting.
            let start = below(bytes.count)
            let chunk = Array(bytes[start..<min(bytes.count, start + 1 + below(32))])
            let copies = below(4) == 0 ? 1 + below(2_000) : 1
            var repeated: [UInt8] = []
            for _ in 0..<copies where repeated.count < Self.maxLength { repeated += chunk }
            bytes.insert(contentsOf: repeated, at: position)
        case 5 where !other.isEmpty:
            let cut = below(other.count)
            bytes = Array(bytes[..<position]) + other[cut...]
        default:
            bytes.insert(contentsOf: Self.tokens[below(Self.tokens.count)], at: position)
        }
    }
}
