import Foundation
import LiveDispatchCore
import Testing

@Suite("JSONValue parsing and serialization")
struct JSONValueTests {
    @Test("integers stay integers and doubles stay doubles")
    func numbers() throws {
        let value = try JSONValue.parse(#"{"a": 2, "b": 2.5, "c": -0, "d": 1e3, "e": 9007199254740993}"#)
        #expect(value["a"] == .integer(2))
        #expect(value["b"] == .double(2.5))
        #expect(value["c"] == .integer(0))
        #expect(value["d"] == .double(1000))
        #expect(value["e"] == .integer(9_007_199_254_740_993))
        #expect(value.serializedString() == #"{"a":2,"b":2.5,"c":0,"d":1000,"e":9007199254740993}"#)
    }

    @Test("decimals read as strtod reads them, short ones and long ones alike")
    func decimalsAgreeWithStrtod() throws {
        var generator = SplitMix64(seed: 42)
        var texts = ["0.1", "-0.0", "0.5", "1.0", "1764010000.123456", "123456789012345.5", "0.000000000000000000000001", "99999999999999.9",
                     "999999999999999.9", "4.35", "-17.000000000000004", "1.7976931348623157", "0.30000000000000004"]
        for _ in 0..<5_000 {
            let whole = generator.next() % 10_000_000_000
            let digits = Int(generator.next() % 12) + 1
            let fraction = String(generator.next() % 1_000_000_000_000).suffix(digits)
            texts.append("\(generator.next() % 2 == 0 ? "-" : "")\(whole).\(fraction.isEmpty ? "0" : fraction)")
        }
        var mismatches: [String] = []
        for text in texts {
            let expected = Double(text)
            switch Result(catching: { () throws(JSONParseError) in try JSONValue.parse(text) }) {
            case .success(.double(let parsed)) where parsed.bitPattern == expected?.bitPattern:
                continue
            case .failure(let error) where error.isInexactNumber:
                // Refused only when strtod's double is written back as another value.
                let decimal = { (text: String) in Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) }
                if let expected, decimal(expected.description) != decimal(text) { continue }
                mismatches.append(text)
            default:
                mismatches.append(text)
            }
        }
        #expect(mismatches.isEmpty, "read differently from strtod: \(mismatches.prefix(5))")
    }

    @Test("integers, and doubles without a fraction, are written as their decimal digits")
    func integersDigitByDigit() {
        var generator = SplitMix64(seed: 7)
        var values: [Int64] = [0, 9, 10, 99, 100, 1_764_010_000, .max, .min, .max - 1, .min + 1, -1, -9, -10, -100]
        for _ in 0..<2_000 {
            values.append(Int64(bitPattern: generator.next()) >> (generator.next() % 64))
        }
        let wrong = values.filter { JSONValue.integer($0).serialized() != Array(String($0).utf8) }
        #expect(wrong.isEmpty, "written differently from String(_:): \(wrong.prefix(5))")
        let doubles: [(Double, String)] = [(-0.0, "0"), (-3, "-3"), (1e15 - 1, "999999999999999"), (1_764_010_000, "1764010000"), (1e15, 1e15.description), (2.5, "2.5")]
        for (value, text) in doubles {
            #expect(String(decoding: JSONValue.double(value).serialized(), as: UTF8.self) == text)
        }
    }

    @Test("serialization sorts keys and escapes strings")
    func serialization() throws {
        let value: JSONValue = ["z": "quote\" backslash\\ newline\n tab\t bell\u{07}", "a": [true, false, nil], "m": ["x": 1.25]]
        #expect(value.serializedString() == #"{"a":[true,false,null],"m":{"x":1.25},"z":"quote\" backslash\\ newline\n tab\t bell\u0007"}"#)
        #expect(try JSONValue.parse(value.serializedString()) == value)
    }

    @Test("every control character is escaped, at the start, middle and end of a string")
    func controlCharacters() throws {
        let named: [UInt8: String] = [0x08: #"\b"#, 0x09: #"\t"#, 0x0A: #"\n"#, 0x0C: #"\f"#, 0x0D: #"\r"#]
        for byte in UInt8(0)..<0x20 {
            let character = String(UnicodeScalar(byte))
            let escaped = named[byte] ?? "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            let text = character + "ab" + character + "é" + character
            #expect(JSONValue.string(text).serializedString() == "\"\(escaped)ab\(escaped)é\(escaped)\"")
            #expect(try JSONValue.parse(JSONValue.string(text).serializedString()) == .string(text))
        }
        #expect(JSONValue.string("").serializedString() == #""""#)
        #expect(JSONValue.string(#"\""#).serializedString() == #""\\\"""#)
    }

    @Test("unicode: escapes, surrogate pairs and raw UTF-8 survive a round trip")
    func unicode() throws {
        let value = try JSONValue.parse(#"{"goal": "\u00e9\ud83c\udfc8 Zoë ⚽️"}"#)
        #expect(value["goal"] == .string("é🏈 Zoë ⚽️"))
        #expect(try JSONValue.parse(value.serializedString()) == value)
    }

    @Test("non-finite doubles are written as null")
    func nonFinite() {
        #expect(JSONValue.double(.infinity).serializedString() == "null")
        #expect(JSONValue.double(.nan).serializedString() == "null")
    }

    @Test(
        "errors say what was wrong and where",
        arguments: [
            ("", "line 1, column 1: empty input, expected a JSON value"),
            ("{\"a\": 1,\n \"b\" 2}", "line 2, column 6: unexpected '2', expected ':' after the object key \"b\""),
            ("[1, 2", "line 1, column 6: unexpected end of input, expected ',' or ']' in an array"),
            ("{\"a\": tru}", "line 1, column 7: invalid literal, expected 'true'"),
            ("{\"a\": 01}", "line 1, column 7: invalid number, leading zeros are not allowed"),
            ("\"abc", "line 1, column 1: unterminated string"),
            ("{\"a\": 1} x", "line 1, column 10: unexpected 'x' after the JSON value"),
            ("{\"a\": 1, \"a\": 2}", "line 1, column 10: duplicate object key \"a\""),
            ("\"\\ud800\"", "line 1, column 2: unpaired UTF-16 surrogate in a \\u escape"),
            ("\"a\u{01}\"", "line 1, column 3: control character 0x1 must be escaped in a string"),
        ])
    func errors(input: String, message: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(input) }
        do {
            _ = try JSONValue.parse(input)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("invalid UTF-8 is refused")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test("nesting and size are bounded")
    func limits() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        #expect((try? JSONValue.parse(deep, limits: JSONParseLimits(maxDepth: 128))) != nil)
        #expect(throws: JSONParseError.self) {
            try JSONValue.parse("[1,2,3]", limits: JSONParseLimits(maxDepth: 8, maxBytes: 4))
        }
    }
}

@Suite("identifiers and dates")
struct IdentifierTests {
    @Test("a device token reads hex in either case and writes lowercase")
    func tokenHex() throws {
        let token = try DeviceToken(hex: "00FFa1B2")
        #expect(token.bytes == [0x00, 0xFF, 0xA1, 0xB2])
        #expect(token.hex == "00ffa1b2")
    }

    @Test(
        "a bad device token is a clear error",
        arguments: [
            ("", "device token is empty"),
            ("abc", "device token has 3 hex digits, expected an even number"),
            ("abzz", "device token has a non-hex character at position 3"),
            (String(repeating: "ab", count: 201), "device token is 201 bytes, longer than 200"),
        ])
    func badToken(hex: String, message: String) {
        #expect(throws: ValueError(message)) { try DeviceToken(hex: hex) }
    }

    @Test("activity ids refuse empty, overlong and control characters")
    func activityIDs() throws {
        #expect(try ActivityID("match-42").rawValue == "match-42")
        #expect(throws: ValueError("activity id is empty")) { try ActivityID("") }
        #expect(throws: ValueError.self) { try ActivityID(String(repeating: "x", count: 257)) }
        #expect(throws: ValueError.self) { try ActivityID("a\u{1F}b") }
    }

    @Test(
        "identifiers refuse what can fake a log line or reorder printed text: C1 controls, line separators, bidi controls",
        arguments: ["\u{85}", "\u{9B}", "\u{2028}", "\u{2029}", "\u{202E}", "\u{2066}", "\u{200F}", "\u{61C}"])
    func unprintableIdentifiers(character: String) {
        let text = "match" + character + "42"
        let code = character.unicodeScalars.first.map { String($0.value, radix: 16, uppercase: true) } ?? ""
        #expect(throws: ValueError.self) { try ActivityID(text) }
        #expect(throws: ValueError.self) { try AudienceKey(text) }
        do {
            _ = try ActivityID(text)
        } catch {
            #expect(error.description.contains("U+" + String(repeating: "0", count: max(0, 4 - code.count)) + code), "\(error)")
        }
        // Text in other scripts, emoji and marks stays an id.
        #expect(throws: Never.self) { try ActivityID("مباراة-٤٢ 🏈 café") }
    }

    @Test(
        "ISO-8601 dates",
        arguments: [
            ("2025-11-24T18:00:00Z", 1_764_007_200.0),
            ("2025-11-24T19:00:00+01:00", 1_764_007_200.0),
            ("2025-11-24T18:00:00.5Z", 1_764_007_200.5),
            ("2025-11-24", 1_763_942_400.0),
            ("1970-01-01T00:00:00Z", 0.0),
            ("2024-02-29T12:00:00-0530", 1_709_227_800.0),
        ])
    func isoDates(text: String, seconds: Double) {
        #expect(UnixTime(iso8601: text)?.seconds == seconds)
    }

    @Test("malformed ISO-8601 dates are refused", arguments: ["2025-13-01", "2025-02-30T00:00:00Z", "2025-11-24T18:00", "yesterday", "2025-11-24T18:00:00"])
    func badIsoDates(text: String) {
        #expect(UnixTime(iso8601: text) == nil)
    }

    @Test("dates print as ISO-8601")
    func isoOutput() {
        #expect(UnixTime(seconds: 1_764_007_200.9).iso8601 == "2025-11-24T18:00:00Z")
    }
}

@Suite("JSON number edge cases")
struct JSONNumberTests {
    @Test(
        "integers at and past the Int64 limits",
        arguments: [
            ("9223372036854775807", JSONValue.integer(Int64.max)),
            ("-9223372036854775808", JSONValue.integer(Int64.min)),
            ("0", JSONValue.integer(0)),
            ("-0", JSONValue.integer(0)),
            ("-12", JSONValue.integer(-12)),
            ("1.5e2", JSONValue.double(150)),
        ])
    func limits(text: String, value: JSONValue) throws {
        #expect(try JSONValue.parse(text) == value)
    }

    @Test("a number too large for a double or an integer past Int64 is refused, not rounded")
    func outOfRange() {
        for text in ["1e999", "9223372036854775808", "-9223372036854775809", "-17.000000000000001"] {
            #expect(throws: JSONParseError.self, "\(text)") { try JSONValue.parse(text) }
        }
    }
}
