import LiveDispatchCore
import Testing

@Suite("Dead letters")
struct DeadLetterTests {
    static let now = UnixTime(seconds: 1_770_593_400)

    @Test("a dead letter of 900 KB of control characters is cut to fit, keeping where it came from")
    func cutToFit() throws {
        let value = [UInt8](repeating: 0x01, count: 900_000)
        let letter = DeadLetter(
            reason: .invalidJSON, message: "the event is not JSON", rule: "goal",
            origin: .init(topic: "sports.scores", partition: 3, offset: 77, key: "k", valueBytes: value), deadLetteredAt: Self.now)
        #expect(letter.json.serialized().count > 5_000_000)
        let bytes = letter.serialized()
        #expect(bytes.count <= DeadLetter.maxBytes)
        #expect(bytes.count > DeadLetter.maxBytes - 16)
        let cut = try DeadLetter(json: JSONValue.parse(bytes))
        #expect(cut.reason == .invalidJSON)
        #expect(cut.rule == "goal")
        #expect(cut.message == "the event is not JSON")
        #expect(cut.origin?.topic == "sports.scores")
        #expect(cut.origin?.partition == 3)
        #expect(cut.origin?.offset == 77)
        #expect(cut.origin?.key == "k")
        let prefix = try #require(cut.origin?.value)
        #expect(prefix.unicodeScalars.count > 80_000)
        #expect(prefix.unicodeScalars.allSatisfy { $0 == "\u{1}" })
        #expect(cut.details["truncated"] == .bool(true))
        #expect(cut.details["value_bytes"] == .integer(900_000))
    }

    @Test("a dead letter that fits is written whole, unmarked")
    func fitsWhole() throws {
        let letter = DeadLetter(
            reason: .invalidJSON, message: "m", origin: .init(topic: "t", partition: 0, offset: 1, key: nil, valueBytes: Array("{x".utf8)),
            deadLetteredAt: Self.now)
        #expect(letter.serialized() == letter.json.serialized())
        #expect(try DeadLetter(json: JSONValue.parse(letter.serialized())) == letter)
    }

    @Test("a huge message is cut too, and a tiny limit still keeps the reason and origin")
    func hugeMessage() throws {
        let letter = DeadLetter(
            reason: .ruleError, message: String(repeating: "m", count: 100_000),
            origin: .init(topic: "t", partition: 1, offset: 2, key: nil, valueBytes: Array(repeating: UInt8(ascii: "v"), count: 10_000)),
            deadLetteredAt: Self.now)
        let cut = try DeadLetter(json: JSONValue.parse(letter.serialized(maxBytes: 4_096)))
        #expect(cut.message.count == 1_000)
        #expect((cut.origin?.value?.count ?? 0) > 2_000)
        let tiny = try DeadLetter(json: JSONValue.parse(letter.serialized(maxBytes: 300)))
        #expect(tiny.reason == .ruleError)
        #expect(tiny.origin?.offset == 2)
        #expect(tiny.message.isEmpty)
    }

    @Test("a value that is not UTF-8 is kept in base64, cut or whole")
    func base64() throws {
        let value: [UInt8] = [0xFF, 0xFE, 0x00, 0x41, 0xC3]
        let letter = DeadLetter(
            reason: .invalidJSON, message: "m", origin: .init(topic: "t", partition: 0, offset: 1, key: nil, valueBytes: value),
            deadLetteredAt: Self.now)
        let read = try DeadLetter(json: JSONValue.parse(letter.serialized()))
        #expect(read.origin?.value == nil)
        #expect(read.origin?.valueBase64 == "//4AQcM=")
        #expect(Base64.encode([]) == "")
        #expect(Base64.encode(Array("f".utf8)) == "Zg==")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        let big = DeadLetter(
            reason: .invalidJSON, message: "m",
            origin: .init(topic: "t", partition: 0, offset: 1, key: nil, valueBytes: Array(repeating: 0xFF, count: 30_000)),
            deadLetteredAt: Self.now)
        let cut = try DeadLetter(json: JSONValue.parse(big.serialized(maxBytes: 8_192)))
        #expect(cut.details["value_bytes"] == .integer(30_000))
        #expect(cut.origin?.valueBase64?.hasPrefix("////") == true)
    }
}
