import Foundation
import LiveDispatchCore
import Synchronization

/// One push the simulator accepted (answered 200).
public struct RecordedPush: Sendable, Hashable {
    /// Order of acceptance over the whole server, from 1.
    public var sequence: Int
    /// The device token, lowercase hex.
    public var deviceToken: String
    public var apnsID: String
    /// Request headers except `authorization`, pseudo-headers included, in order.
    public var headerFields: [HeaderField]
    public var payload: [UInt8]
    /// Which connection carried it (from 1, in order of acceptance).
    public var connectionID: Int
    /// Server time of acceptance, Unix seconds.
    public var receivedAt: Double

    /// Request headers except `authorization` by name (the first of each).
    public var headers: [String: String] {
        var map: [String: String] = [:]
        for field in headerFields where map[field.name] == nil { map[field.name] = field.value }
        return map
    }

    /// The payload as JSON (it was checked to be JSON when accepted).
    public var payloadJSON: JSONValue? { try? JSONValue.parse(payload) }

    /// One JSONL line (without the newline).
    var jsonLine: [UInt8] {
        var headerObject: [String: JSONValue] = [:]
        for (name, value) in headers { headerObject[name] = .string(value) }

        let object: JSONValue = .object([
            "sequence": .integer(Int64(sequence)),
            "token": .string(deviceToken),
            "apns_id": .string(apnsID),
            "connection": .integer(Int64(connectionID)),
            "received_at": .double(receivedAt),
            "headers": .object(headerObject),
            "payload": payloadJSON ?? .string(String(decoding: payload, as: UTF8.self)),
        ])
        return object.serialized()
    }
}

/// One request header.
public struct HeaderField: Sendable, Hashable {
    public var name: String
    public var value: String
}

/// What one device token received.
public struct TokenHistory: Sendable, Hashable {
    public var count: Int
    public var last: RecordedPush
}

/// Records accepted pushes: per token (count, last), the arrival order
/// (the newest `historyLimit` pushes), and optionally a JSONL file with one
/// line per push. Safe from any thread.
final class PushRecorder: Sendable {
    private struct State {
        var history: [RecordedPush] = []
        var historyStart = 0
        var byToken: [String: TokenHistory] = [:]
        var accepted = 0
    }

    private let state = Mutex(State())
    private let historyLimit: Int
    private let file: JSONLWriter?

    init(historyLimit: Int, recordFile: String?) throws(SimulatorError) {
        self.historyLimit = max(historyLimit, 0)
        self.file = try recordFile.map { path throws(SimulatorError) in try JSONLWriter(path: path) }
    }

    /// Records a push and returns its sequence number.
    @discardableResult
    func record(
        deviceToken: String, apnsID: String, headers: [(name: String, value: String)], payload: [UInt8],
        connectionID: Int, receivedAt: Double
    ) -> Int {
        let fields = headers.compactMap { name, value in
            name == "authorization" ? nil : HeaderField(name: name, value: value)
        }
        let push = state.withLock { state -> RecordedPush in
            state.accepted += 1
            let push = RecordedPush(
                sequence: state.accepted, deviceToken: deviceToken, apnsID: apnsID, headerFields: fields,
                payload: payload, connectionID: connectionID, receivedAt: receivedAt)
            if historyLimit > 0 {
                state.history.append(push)
                if state.history.count - state.historyStart > historyLimit { state.historyStart += 1 }
                // Compact now and then rather than shifting on every push.
                if state.historyStart > historyLimit { state.history.removeFirst(state.historyStart); state.historyStart = 0 }
            }
            let count = (state.byToken[deviceToken]?.count ?? 0) + 1
            state.byToken[deviceToken] = TokenHistory(count: count, last: push)
            return push
        }
        file?.write(push.jsonLine)
        return push.sequence
    }

    var acceptedCount: Int { state.withLock { $0.accepted } }

    /// The recorded pushes in order of acceptance (the newest `historyLimit`).
    var history: [RecordedPush] { state.withLock { Array($0.history[$0.historyStart...]) } }

    func history(for deviceToken: String) -> [RecordedPush] {
        state.withLock { state in state.history[state.historyStart...].filter { $0.deviceToken == deviceToken } }
    }

    func summary(for deviceToken: String) -> TokenHistory? { state.withLock { $0.byToken[deviceToken] } }

    var tokens: [String: TokenHistory] { state.withLock { $0.byToken } }

    func reset() {
        state.withLock { $0 = State() }
    }

    /// Waits until every line handed to the file is written.
    func flush() { file?.flush() }
}

/// Appends lines to a file on its own serial queue, off the event loops.
final class JSONLWriter: Sendable {
    private let handle: FileHandle
    private let queue = DispatchQueue(label: "livedispatch.simulator.record")

    init(path: String) throws(SimulatorError) {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw .invalidConfiguration("cannot create the record file \(path); check the directory exists and is writable")
        }
        self.handle = handle
    }

    func write(_ line: [UInt8]) {
        queue.async { [handle] in
            handle.write(Data(line + [UInt8(ascii: "\n")]))
        }
    }

    func flush() {
        queue.sync { [handle] in try? handle.synchronize() }
    }

    deinit {
        queue.sync { [handle] in try? handle.close() }
    }
}
