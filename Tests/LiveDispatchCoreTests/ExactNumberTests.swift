import Foundation
@testable import LiveDispatchCore
import Testing

/// Numbers are carried exactly or refused with their field, never rounded:
/// by the parser, the record decoders and the dispatcher.
@Suite("Exact numbers")
struct ExactNumberTests {
    /// The numbers of the issue: past Int64, and below a double's least.
    static let refused = ["18446744073709551616", "9223372036854775809", "1e-400"]

    func parseError(_ text: String) -> JSONParseError? {
        do {
            _ = try JSONValue.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a number a double or an Int64 cannot carry is refused, naming its path",
        arguments: refused + [
            "-9223372036854775809", "9223372036854775808", "1e400", "-1.8e308", "18446744073709551616.0", "0.30000000000000004441",
            "3e-324", "1e-99999999999999999999", "123456789012345678.5", "9007199254740993.0", String(repeating: "9", count: 400),
        ])
    func refusedNumbers(number: String) throws {
        let error = try #require(parseError(#"{"content_state": {"scores": [1, {"big": \#(number)}]}}"#))
        #expect(error.isInexactNumber)
        #expect(error.field == "content_state.scores[1].big")
        #expect(error.path == [.member("content_state"), .member("scores"), .element(1), .member("big")])
        #expect(error.column == 42)
        #expect(error.message.hasPrefix("integer") || error.message.hasPrefix("number"))
        #expect(error.description.hasPrefix("line 1, column 42, field 'content_state.scores[1].big': "))
        // Alone, the same number is refused at the top level.
        #expect(parseError(number)?.isInexactNumber == true)
        #expect(parseError(number)?.field == "")
    }

    @Test("what each refusal says")
    func messages() {
        #expect(
            parseError("18446744073709551616")?.message
                == "integer 18446744073709551616 is outside the 64-bit range -9223372036854775808...9223372036854775807; send it as a string to keep every digit")
        #expect(
            parseError("1e-400")?.message
                == "number 1e-400 is too small for a 64-bit double (it would be read as 0); send it as a string to keep every digit")
        #expect(parseError("1e400")?.message == "number 1e400 is beyond the range of a 64-bit double; send it as a string to keep every digit")
        #expect(
            parseError("9007199254740993.0")?.message
                == "number 9007199254740993.0 would be rounded to 9007199254740992.0 by a 64-bit double; send it as a string to keep every digit")
        #expect(parseError(String(repeating: "9", count: 400))?.message.contains("integer \(String(repeating: "9", count: 40))…") == true)
    }

    @Test(
        "a number that is exactly what it is written back as is kept",
        arguments: [
            ("9223372036854775807", JSONValue.integer(.max)), ("-9223372036854775808", .integer(.min)),
            ("1.8446744073709552e19", .double(18_446_744_073_709_551_616)), ("5e-324", .double(.leastNonzeroMagnitude)),
            ("2.2250738585072014e-308", .double(.leastNormalMagnitude)), ("1.7976931348623157e308", .double(.greatestFiniteMagnitude)),
            ("0.30000000000000004", .double(0.1 + 0.2)), ("0.1", .double(0.1)), ("100.000000000000000000000", .double(100)),
            ("1e22", .double(1e22)), ("-0.0", .double(-0.0)), ("0e999999999999999999", .double(0)), ("123456789.123456", .double(123_456_789.123456)),
        ])
    func keptNumbers(text: String, value: JSONValue) throws {
        let parsed = try JSONValue.parse(text)
        #expect(parsed == value)
        #expect(try JSONValue.parse(parsed.serialized()).numberValue == value.numberValue)
    }

    /// The decimal value of a number's text, by Foundation (38 digits: exact for the texts made here).
    static func decimal(_ text: String) -> Decimal? { Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) }

    @Test("random numbers: accepted exactly when what is written back has the same value, and every double written reads back")
    func randomized() throws {
        var random = SplitMix64(seed: 0x45_07)
        for _ in 0..<20_000 {
            // A literal of 1 to 30 digits, a point somewhere or none, and an exponent or none.
            let count = Int(random.next() % 30) + 1
            var digits = (0..<count).map { _ in Character(Unicode.Scalar(UInt8(ascii: "0") + UInt8(random.next() % 10))) }
            if digits.count > 1, digits[0] == "0" { digits[0] = "1" }
            var text = (random.next() % 2 == 0 ? "-" : "") + String(digits)
            let point = random.next() % 3 == 0 ? nil : Int(random.next() % UInt64(count))
            if let point, point > 0 { text.insert(".", at: text.index(text.endIndex, offsetBy: -point)) }
            if random.next() % 3 == 0 { text += "e\(Int(random.next() % 100) - 50)" }
            let isInteger = !text.contains(".") && !text.contains("e")
            let written = try #require(Self.decimal(text), "\(text)")
            switch Result(catching: { () throws(JSONParseError) in try JSONValue.parse(text) }) {
            case .success(let value):
                let back = try #require(Self.decimal(value.serializedString()))
                #expect(back == written, "\(text) was written back as \(value.serializedString())")
                if isInteger { #expect(value.typeName == "int", "\(text)") }
            case .failure(let error):
                #expect(error.isInexactNumber, "\(text): \(error)")
                if isInteger {
                    #expect(Int64(text) == nil, "\(text) fits an Int64")
                } else {
                    let double = try #require(Double(text))
                    #expect(Self.decimal(JSONValue.double(double).serializedString()) != written, "\(text) was refused but is exact")
                }
            }
        }
        // Any finite double written is read back as the same double.
        for _ in 0..<20_000 {
            let double = Double(bitPattern: random.next())
            guard double.isFinite else { continue }
            let parsed = try JSONValue.parse(JSONValue.double(double).serialized())
            #expect(parsed.numberValue == double, "\(double)")
        }
    }

    @Test("a command or a registration with such a number is refused on the number's field")
    func records() {
        for number in Self.refused {
            let command = #"{"activity_id": "m", "event": "update", "content_state": {"score": {"home": \#(number)}}}"#
            #expect(throws: FieldError.self) { try ActivityCommand(bytes: Array(command.utf8)) }
            do {
                _ = try ActivityCommand(bytes: Array(command.utf8))
            } catch {
                #expect(error.field == "content_state.score.home")
                #expect(error.message.contains(number))
            }
        }
        let token = String(repeating: "ab", count: 32)
        let registration = #"{"activity_id": "m", "token": "\#(token)", "action": "register", "expires_at": 1e400}"#
        do {
            _ = try TokenRecord(bytes: Array(registration.utf8))
            Issue.record("a registration with 1e400 was read")
        } catch {
            #expect(error.field == "expires_at")
        }
    }

    @Test("a command record with such a number becomes a dead letter naming the field; nothing is pushed")
    func deadLetter() throws {
        var harness = DispatcherHarness()
        harness.restore()
        for (offset, number) in Self.refused.enumerated() {
            let value = #"{"activity_id": "match-42", "event": "update", "content_state": {"goals": [0, \#(number)]}}"#
            harness.command(Int64(offset), value, key: "match-42")
        }
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == Array(repeating: .invalidCommand, count: Self.refused.count))
        for (letter, number) in zip(letters, Self.refused) {
            #expect(letter.message.contains("field 'content_state.goals[1]'"), "\(letter.message)")
            #expect(letter.message.contains(number), "\(letter.message)")
            // The original keeps every digit.
            #expect(letter.origin?.value?.contains(number) == true)
        }
        #expect(harness.sent.isEmpty)
        #expect(harness.dispatcher.state(of: try ActivityID("match-42")) == nil)
        #expect(harness.commits[.commands] == Int64(Self.refused.count))
    }
}
