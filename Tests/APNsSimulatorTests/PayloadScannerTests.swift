import LiveDispatchCore
import Testing

@testable import APNsSimulator

@Suite("Payload scanner")
struct PayloadScannerTests {
    /// The full parser's verdict, the reference the scanner must agree with.
    static func reference(_ text: String) -> PayloadFacts? {
        (try? JSONValue.parse(Array(text.utf8))).map(PayloadFacts.init)
    }

    /// Whether the full parser refuses `bytes` only for a number it cannot
    /// carry exactly: valid JSON it has no verdict on, as APNs takes it.
    static func hasInexactNumber(_ bytes: [UInt8]) -> Bool {
        do {
            _ = try JSONValue.parse(bytes)
            return false
        } catch let error as JSONParseError {
            return error.isInexactNumber
        } catch {
            return false
        }
    }

    static let corpus: [String] = [
        #"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"a":[1,2.5,-3e2,true,false,null]}}}"#,
        #"{"aps":{"event":"end","timestamp":1.5e9,"dismissal-date":0}}"#,
        #" { "aps" : { "timestamp" : -0.25 , "event" : "start" } } "#,
        #"{"aps":{"event":"update"}}"#,
        #"{"aps":{"timestamp":1}}"#,
        #"{"aps":{"event":5,"timestamp":"1"}}"#,
        #"{"aps":[]}"#,
        #"{"aps":"x"}"#,
        #"{"other":{"aps":{"event":"update","timestamp":1}}}"#,
        #"{"aps":{"event":"update","timestamp":1},"aps":{"event":"end"}}"#,
        #"{"aps":{"event":"update","timestamp":1},"aps":3}"#,
        #"{"aps":{"event":"update","timestamp":1,"x":{"k":1,"k":2}}}"#,
        #"{"aps":{"event":"update","timestamp":1,"x":{"k":1,"\u006b":2}}}"#,
        #"{"aps":{"event":"update","event":"end","timestamp":1}}"#,
        #"{"aps":{"event":"update","timestamp":1,"x":{"ab":1,"a":2,"b":3}}}"#,
        #"{"aps":{"event":"upd\u0061te","timestamp":1}}"#,
        #"{"\u0061ps":{"event":"update","timestamp":1}}"#,
        #"{"aps":{"event":"update","timestamp":1,"alert":{"title":"Goal! \ud83c\udf89 \"x\" \\ \/ \n"}}}"#,
        #"{"aps":{"event":"update","timestamp":1,"alert":{"title":"Tor für Ümit — 🎉"}}}"#,
        #"[1,2,3]"#, #""just a string""#, #"42"#, #"null"#, #"{}"#, #"[]"#,
        #"{"aps":{"event":"update","timestamp":01}}"#,
        #"{"aps":{"event":"update","timestamp":1e400}}"#,
        #"{"aps":{"event":"update","timestamp":-1e400}}"#,
        #"{"aps":{"event":"update","timestamp":1e-400}}"#,
        #"{"aps":{"event":"update","timestamp":"# + String(repeating: "9", count: 320) + "}}",
        #"{"aps":{"event":"update","timestamp":"# + String(repeating: "9", count: 20) + "}}",
        #"{"aps":{"event":"update","timestamp":1.}}"#,
        #"{"aps":{"event":"update","timestamp":.5}}"#,
        #"{"aps":{"event":"update","timestamp":1e}}"#,
        #"{"aps":{"event":"update","timestamp":+1}}"#,
        #"{"aps":{"event":"update","timestamp":1,}}"#,
        #"{"aps":{"event":"update" "timestamp":1}}"#,
        #"{"aps":{"event":"update","timestamp":1}"#,
        #"{"aps":{"event":"update","timestamp":1}}}"#,
        #"{"aps":{"event":'update',"timestamp":1}}"#,
        #"{"aps":{"event":"up\qdate","timestamp":1}}"#,
        #"{"aps":{"event":"update","timestamp":1,"x":"\u12"}}"#,
        #"{"aps":{"event":"update","timestamp":tru}}"#,
        #"{aps:{}}"#, "", " ", "{", "\"unterminated",
        "{\"aps\":{\"event\":\"up\tdate\",\"timestamp\":1}}",
        String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
        #"{"a":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}",
    ]

    @Test("agrees with the full JSON parser on valid and broken payloads")
    func agreesWithParser() {
        for text in Self.corpus where !Self.hasInexactNumber(Array(text.utf8)) {
            #expect(PayloadScanner.facts(of: Array(text.utf8)) == Self.reference(text), "\(text)")
        }
    }

    @Test("agrees with the full parser on 20,000 random mutations of payloads")
    func randomMutations() {
        var random = SplitMix64(seed: 7)
        let alphabet = Array(#"{}[]:,"\u0aeEt1.-+ nlfrs"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF]
        var disagreements: [String] = []
        for round in 0..<20_000 {
            var bytes = Array(Self.corpus[Int(random.next() % UInt64(Self.corpus.count))].utf8)
            for _ in 0...(random.next() % 3) {
                let position = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
                let byte = alphabet[Int(random.next() % UInt64(alphabet.count))]
                switch random.next() % 3 {
                case 0 where !bytes.isEmpty: bytes.remove(at: position)
                case 1: bytes.insert(byte, at: position)
                default: if !bytes.isEmpty { bytes[position] = byte }
                }
            }
            if Self.hasInexactNumber(bytes) { continue }
            let reference = (try? JSONValue.parse(bytes)).map(PayloadFacts.init)
            if PayloadScanner.facts(of: bytes) != reference, disagreements.count < 5 {
                disagreements.append("round \(round): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
    }

    @Test("bad UTF-8 is refused")
    func badUTF8() {
        let prefix = Array(#"{"aps":{"event":"update","timestamp":1,"x":""#.utf8)
        let suffix = Array(#""}}"#.utf8)
        for bad: [UInt8] in [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0xF5, 0x80, 0x80, 0x80]] {
            #expect(PayloadScanner.facts(of: prefix + bad + suffix) == nil)
        }
        #expect(PayloadScanner.facts(of: prefix + [0xE2, 0x82, 0xAC] + suffix)?.event == "update")
    }

    @Test("the facts of a Live Activity payload")
    func facts() {
        let facts = PayloadScanner.facts(of: Array(#"{"aps":{"timestamp":1764000000,"event":"end"}}"#.utf8))
        #expect(facts?.apsIsObject == true)
        #expect(facts?.event == "end")
        #expect(facts?.hasNumericTimestamp == true)
    }
}
