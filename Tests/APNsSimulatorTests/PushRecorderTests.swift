import Foundation
import LiveDispatchCore
import Testing

@testable import APNsSimulator

@Suite("Push recorder")
struct PushRecorderTests {
    static let payload = Array("{\"aps\":{\"event\":\"end\",\n\"timestamp\":1764000000}}".utf8)

    @Test("per-token counts, arrival order, a bounded history, no authorization kept")
    func recording() throws {
        let recorder = try PushRecorder(historyLimit: 3, recordFile: nil)
        for index in 1...5 {
            recorder.record(
                .device(index % 2 == 0 ? "aa" : "bb"), apnsID: "id-\(index)",
                headers: HeaderBlock([HeaderField(name: ":path", value: "/3/device/x"), HeaderField(name: "authorization", value: "bearer secret")]),
                payload: Self.payload,
                connectionID: 1, receivedAt: Double(index))
        }
        #expect(recorder.acceptedCount == 5)
        #expect(recorder.history.map(\.apnsID) == ["id-3", "id-4", "id-5"])
        #expect(recorder.history(for: "bb").map(\.sequence) == [3, 5])
        // Only the newer ones, of those kept.
        #expect(recorder.history(after: 3).map(\.sequence) == [4, 5])
        #expect(recorder.history(after: 0).map(\.sequence) == [3, 4, 5])
        #expect(recorder.history(after: 5).isEmpty)
        #expect(recorder.summary(for: "aa")?.count == 2)
        #expect(recorder.summary(for: "aa")?.last.apnsID == "id-4")
        #expect(recorder.summary(for: "bb")?.count == 3)
        #expect(recorder.history.allSatisfy { $0.headers["authorization"] == nil && $0.headers[":path"] == "/3/device/x" })
    }

    @Test("without token summaries, pushes are counted and kept in the history only")
    func withoutSummaries() throws {
        let recorder = try PushRecorder(historyLimit: 2, recordFile: nil, tokenSummaries: false)
        for index in 1...4 {
            recorder.record(
                index == 4 ? .channel("channel-1") : .device("token-\(index)"), apnsID: "id-\(index)", headers: HeaderBlock(),
                payload: Self.payload, connectionID: 1, receivedAt: Double(index))
        }
        #expect(recorder.acceptedCount == 4)
        #expect(recorder.history.map(\.apnsID) == ["id-3", "id-4"])
        #expect(recorder.tokens.isEmpty && recorder.channels.isEmpty)
        #expect(recorder.summary(for: "token-1") == nil)
    }

    @Test("a record line is one line of JSON with escaped headers and the payload as JSON")
    func jsonLine() throws {
        let push = RecordedPush(
            sequence: 7, recipient: .device("abcd"), apnsID: "id", receivedFields: HeaderBlock([
                HeaderField(name: "authorization", value: "bearer secret"),
                HeaderField(name: "apns-topic", value: "a\"b\\c\u{1}"), HeaderField(name: "apns-topic", value: "second"),
            ]), payload: Self.payload, connectionID: 2, receivedAt: 1.5)
        let line = push.jsonLine
        #expect(!line.contains(UInt8(ascii: "\n")))
        #expect(!String(decoding: line, as: UTF8.self).contains("secret"))
        #expect(push.headerFields.map(\.name) == ["apns-topic", "apns-topic"])
        let value = try JSONValue.parse(line)
        #expect(value["sequence"]?.integerValue == 7)
        #expect(value["token"]?.stringValue == "abcd")
        #expect(value["connection"]?.integerValue == 2)
        #expect(value["received_at"]?.numberValue == 1.5)
        #expect(value["headers"]?["apns-topic"]?.stringValue == "a\"b\\c\u{1}")
        #expect(value["payload"]?["aps"]?["event"]?.stringValue == "end")
    }

    @Test("the JSONL file gets one line per push once flushed")
    func file() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("record-\(UUID().uuidString.prefix(8)).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try PushRecorder(historyLimit: 10, recordFile: path)
        for index in 1...50 {
            recorder.record(
                .device("aa"), apnsID: "id-\(index)", headers: HeaderBlock(), payload: Self.payload, connectionID: 1,
                receivedAt: 0)
        }
        await recorder.flush()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 50)
        #expect(try lines.map { try JSONValue.parse(String($0))["apns_id"]?.stringValue } == (1...50).map { "id-\($0)" })
    }
}
