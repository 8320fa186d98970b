import Foundation
import LiveDispatchCore
import Synchronization

/// Reads the simulator's record of accepted pushes as it grows and feeds
/// each one to the audit.
public final class PushRecordTail: Sendable {
    private struct State {
        var audit: DeliveryAudit
        var lines: AppendedLines
        var lastDeliveryAt: ContinuousClock.Instant?
    }

    private let state: Mutex<State>

    public init(path: String, expected: [String: DeliveryAudit.State]) {
        state = Mutex(State(audit: DeliveryAudit(expected: expected), lines: AppendedLines(path: path)))
    }

    public var audit: DeliveryAudit { state.withLock { $0.audit } }
    public var lastDeliveryAt: ContinuousClock.Instant? { state.withLock { $0.lastDeliveryAt } }

    /// Reads what was appended since the last call.
    public func poll() {
        state.withLock { state in
            while case let lines = state.lines.read(), !lines.isEmpty {
                for line in lines {
                    guard let push = RecordedPushLine(line) else { continue }
                    state.audit.record(token: push.token, state: DeliveryAudit.State(version: push.score, ended: push.ended))
                    state.lastDeliveryAt = .now
                }
            }
        }
    }
}

/// The complete lines appended to a file since the previous read, for
/// following a record the simulator keeps writing.
public struct AppendedLines: Sendable {
    public let path: String
    private var offset: UInt64 = 0
    private var partial: [UInt8] = []

    public init(path: String) {
        self.path = path
    }

    /// The lines completed since the last call, without their line breaks,
    /// from at most `limit` bytes read (call again for the rest); none while
    /// the file does not exist or nothing was appended.
    public mutating func read(limit: Int = 8 << 20) -> [ArraySlice<UInt8>] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: offset)) != nil, let data = try? handle.read(upToCount: limit), !data.isEmpty else { return [] }
        offset += UInt64(data.count)
        var bytes = partial
        bytes.append(contentsOf: data)
        guard let end = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
            partial = bytes
            return []
        }
        partial = Array(bytes[(end + 1)...])
        return bytes[..<end].split(separator: UInt8(ascii: "\n"))
    }
}

/// What the benchmarks read from one line of the simulator's record: the
/// token, the home score the push carries (its version; -1 when it has
/// none), whether it ends the activity, and when the simulator accepted it.
public struct RecordedPushLine: Sendable {
    public var token: String
    public var score: Int64
    public var ended: Bool
    /// Unix seconds.
    public var receivedAt: Double

    /// nil for a line that is not a push to a device.
    public init?(_ line: ArraySlice<UInt8>) {
        guard let push = try? JSONValue.parse(Array(line)), let token = push["token"]?.stringValue else { return nil }
        let aps = push["payload"]?["aps"]
        self.token = token
        score = aps?["content-state"]?["teamOneScore"]?.integerValue ?? -1
        ended = aps?["event"]?.stringValue == "end"
        receivedAt = push["received_at"]?.numberValue ?? .nan
    }
}
