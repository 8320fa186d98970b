import Foundation
import LiveDispatchCore
import Synchronization

/// Who an accepted push went to.
public enum PushRecipient: Sendable, Hashable {
    /// A device token, lowercase hex.
    case device(String)
    /// Every subscriber of a broadcast channel.
    case channel(String)
}

/// One push the simulator accepted (answered 200).
public struct RecordedPush: Sendable, Hashable {
    /// Order of acceptance over the whole server, from 1.
    public var sequence: Int
    public var recipient: PushRecipient
    /// The device token, lowercase hex; empty for a broadcast.
    public var deviceToken: String {
        switch recipient {
        case .device(let token): token
        case .channel: ""
        }
    }
    /// The channel of a broadcast; nil for a push to a device.
    public var channelID: String? {
        switch recipient {
        case .device: nil
        case .channel(let channelID): channelID
        }
    }
    public var apnsID: String
    /// Request headers except `authorization`, pseudo-headers included, in order.
    public var headerFields: [HeaderField] { receivedFields.fields.filter { $0.name != "authorization" } }
    /// The headers as received, kept as bytes (no copy per push); the
    /// `authorization` field is never handed out or written.
    var receivedFields: HeaderBlock
    public var payload: [UInt8]
    /// Which connection carried it (from 1, in order of acceptance).
    public var connectionID: Int
    /// Server time of acceptance, Unix seconds.
    public var receivedAt: Double

    /// Request headers except `authorization` by name (the first of each).
    public var headers: [String: String] {
        var map: [String: String] = [:]
        for field in receivedFields.fields where field.name != "authorization" && map[field.name] == nil {
            map[field.name] = field.value
        }
        return map
    }

    /// The payload as JSON (it was checked to be JSON when accepted).
    public var payloadJSON: JSONValue? { try? JSONValue.parse(payload) }

    /// One JSONL line (without the newline): `sequence`, `token` (or
    /// `channel` for a broadcast), `apns_id`,
    /// `connection`, `received_at`, `headers` (first value of each name) and
    /// `payload` as the JSON it was. Built byte by byte: a busy simulator
    /// writes tens of thousands a second.
    var jsonLine: [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(payload.count + 512)
        func key(_ name: String) {
            line.append(line.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            JSONLine.appendString(name, to: &line)
            line.append(UInt8(ascii: ":"))
        }
        key("sequence")
        line.append(contentsOf: String(sequence).utf8)
        switch recipient {
        case .device(let token):
            key("token")
            JSONLine.appendString(token, to: &line)
        case .channel(let channelID):
            key("channel")
            JSONLine.appendString(channelID, to: &line)
        }
        key("apns_id")
        JSONLine.appendString(apnsID, to: &line)
        key("connection")
        line.append(contentsOf: String(connectionID).utf8)
        key("received_at")
        line.append(contentsOf: String(receivedAt).utf8)
        key("headers")
        line.append(UInt8(ascii: "{"))
        var written: [Int] = []
        let block = receivedFields
        for index in 0..<block.count where !block.name(at: index, is: "authorization") {
            // The first value of each name, as `headers` gives it.
            guard !written.contains(where: { block.sameName(index, $0) }) else { continue }
            if !written.isEmpty { line.append(UInt8(ascii: ",")) }
            written.append(index)
            JSONLine.appendString(block.nameBytes(at: index), to: &line)
            line.append(UInt8(ascii: ":"))
            JSONLine.appendString(block.valueBytes(at: index), to: &line)
        }
        line.append(UInt8(ascii: "}"))
        key("payload")
        // The payload was accepted as JSON, so it is embedded as it came;
        // a line break in valid JSON can only be whitespace.
        for byte in payload {
            line.append(byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") ? UInt8(ascii: " ") : byte)
        }
        line.append(UInt8(ascii: "}"))
        return line
    }
}

/// JSON string escaping for record lines.
enum JSONLine {
    static func appendString(_ text: String, to line: inout [UInt8]) {
        appendString(text.utf8, to: &line)
    }

    /// Escapes UTF-8 bytes into a JSON string (invalid UTF-8 is passed through
    /// as it came; nghttp2 has already refused control characters in headers).
    static func appendString(_ text: some Sequence<UInt8>, to line: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        line.append(UInt8(ascii: "\""))
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                line.append(UInt8(ascii: "\\"))
                line.append(byte)
            case 0..<0x20:
                line.append(contentsOf: Array("\\u00".utf8))
                line.append(hex.utf8Start[Int(byte >> 4)])
                line.append(hex.utf8Start[Int(byte & 0xF)])
            default:
                line.append(byte)
            }
        }
        line.append(UInt8(ascii: "\""))
    }
}

/// One request header.
public struct HeaderField: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// What one device token (or broadcast channel) received.
public struct TokenHistory: Sendable, Hashable {
    public var count: Int
    public var last: RecordedPush
}

/// Records accepted pushes: per token (count, last; unless turned off), the arrival order
/// (the newest `historyLimit` pushes), and optionally a JSONL file with one
/// line per push. Safe from any thread.
final class PushRecorder: Sendable {
    private struct State {
        /// A ring of the newest pushes; `historyNext` is where the next one goes.
        var history: [RecordedPush] = []
        var historyNext = 0
        var byToken: [String: TokenHistory] = [:]
        var byChannel: [String: TokenHistory] = [:]
        var accepted = 0
    }

    private let state = Mutex(State())
    private let historyLimit: Int
    private let tokenSummaries: Bool
    private let file: JSONLWriter?

    init(historyLimit: Int, recordFile: String?, tokenSummaries: Bool = true) throws(SimulatorError) {
        self.historyLimit = max(historyLimit, 0)
        self.tokenSummaries = tokenSummaries
        self.file = try recordFile.map { path throws(SimulatorError) in try JSONLWriter(path: path) }
    }

    /// Records a push and returns its sequence number.
    @discardableResult
    func record(
        _ recipient: PushRecipient, apnsID: String, headers: HeaderBlock, payload: [UInt8],
        connectionID: Int, receivedAt: Double
    ) -> Int {
        let push = state.withLock { state -> RecordedPush in
            state.accepted += 1
            let push = RecordedPush(
                sequence: state.accepted, recipient: recipient, apnsID: apnsID, receivedFields: headers,
                payload: payload, connectionID: connectionID, receivedAt: receivedAt)
            if historyLimit > 0 {
                if state.history.count < historyLimit {
                    state.history.append(push)
                } else {
                    state.history[state.historyNext] = push
                }
                state.historyNext = (state.historyNext + 1) % historyLimit
            }
            switch recipient {
            case .device where !tokenSummaries, .channel where !tokenSummaries:
                break
            case .device(let token):
                state.byToken[token] = TokenHistory(count: (state.byToken[token]?.count ?? 0) + 1, last: push)
            case .channel(let channelID):
                state.byChannel[channelID] = TokenHistory(count: (state.byChannel[channelID]?.count ?? 0) + 1, last: push)
            }
            return push
        }
        file?.write(push)
        return push.sequence
    }

    var acceptedCount: Int { state.withLock { $0.accepted } }

    /// The recorded pushes in order of acceptance (the newest `historyLimit`).
    var history: [RecordedPush] { state.withLock { Self.ordered($0) } }

    /// The kept pushes accepted after the one numbered `sequence`, oldest
    /// first: a reader following the pushes as they come copies only the
    /// new ones, and never the whole history.
    func history(after sequence: Int) -> [RecordedPush] {
        state.withLock { state in
            let ordered = Self.ordered(state)
            // In order of sequence: the first newer one by bisection.
            var low = 0
            var high = ordered.count
            while low < high {
                let middle = (low + high) / 2
                if ordered[middle].sequence <= sequence { low = middle + 1 } else { high = middle }
            }
            return Array(ordered[low...])
        }
    }

    func history(for deviceToken: String) -> [RecordedPush] {
        state.withLock { state in Self.ordered(state).filter { $0.deviceToken == deviceToken } }
    }

    /// The ring's pushes, oldest first.
    private static func ordered(_ state: State) -> [RecordedPush] {
        guard state.historyNext < state.history.count else { return state.history }
        return Array(state.history[state.historyNext...] + state.history[..<state.historyNext])
    }

    func summary(for deviceToken: String) -> TokenHistory? { state.withLock { $0.byToken[deviceToken] } }

    var tokens: [String: TokenHistory] { state.withLock { $0.byToken } }

    /// Broadcasts received per channel.
    var channels: [String: TokenHistory] { state.withLock { $0.byChannel } }

    func reset() {
        state.withLock { $0 = State() }
    }

    /// Waits until every line handed to the file is written.
    func flush() async { await file?.flush() }
}

/// Appends one JSON line per push to a file on its own serial queue, off
/// the event loops. Pushes recorded while a write is under way are written
/// together by the next one, so a busy simulator makes few system calls.
final class JSONLWriter: Sendable {
    private let handle: FileHandle
    private let queue = DispatchQueue(label: "livedispatch.simulator.record")
    private let pending = Mutex<[RecordedPush]>([])

    init(path: String) throws(SimulatorError) {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw .invalidConfiguration("cannot create the record file \(path); check the directory exists and is writable")
        }
        self.handle = handle
    }

    func write(_ push: RecordedPush) {
        let first = pending.withLock { pending in
            pending.append(push)
            return pending.count == 1
        }
        if first { queue.async { self.drain() } }
    }

    private func drain() {
        let batch = pending.withLock { pending in
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        guard !batch.isEmpty else { return }
        var bytes: [UInt8] = []
        for push in batch {
            bytes.append(contentsOf: push.jsonLine)
            bytes.append(UInt8(ascii: "\n"))
        }
        handle.write(Data(bytes))
    }

    /// Waits until every push handed over so far is written and synced;
    /// the writing happens on the writer's queue, not the caller's thread.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.drain()
                try? self.handle.synchronize()
                continuation.resume()
            }
        }
    }

    // No deinit: the handle closes itself when released, wherever the last
    // reference goes (possibly a block on `queue`, which must not wait on it).
}
