import LiveDispatchCore
import LiveDispatchWorker

/// What Kafka holds of one activity, built from its partition of the
/// compacted `state` and `token-store` topics read in offset order: the last
/// snapshot wins, a tombstone removes, and the same holds per token.
struct ActivityReadModel: Sendable {
    let activityID: String
    /// The latest snapshot, nil before the first or after a tombstone.
    private(set) var state: JSONValue?
    /// Registrations by token (hex), the latest of each.
    private(set) var tokens: [String: JSONValue] = [:]

    init(activityID: String) { self.activityID = activityID }

    /// Takes one record of the activity's `state` partition.
    mutating func stateRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key, String(decoding: key, as: UTF8.self) == activityID else { return }
        guard let value else {
            state = nil
            return
        }
        if let json = try? JSONValue.parse(value), case .object = json { state = json }
    }

    /// Takes one record of the activity's `token-store` partition (key: activity id, U+001F, token).
    mutating func tokenStoreRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key else { return }
        let text = String(decoding: key, as: UTF8.self)
        let prefix = activityID + "\u{1F}"
        guard text.hasPrefix(prefix) else { return }
        let token = String(text.dropFirst(prefix.count))
        guard let value else {
            tokens[token] = nil
            return
        }
        if let json = try? JSONValue.parse(value), case .object = json { tokens[token] = json }
    }

    /// Whether Kafka holds anything of the activity.
    var isKnown: Bool { state != nil || !tokens.isEmpty }

    /// The snapshot's version, when it has one that fits.
    var version: Int? { state?["version"]?.integerValue.flatMap { Int(exactly: $0) } }

    var isEnded: Bool { state?["ended_at"].map { !$0.isNull } ?? false }

    /// What the Lock Screen shows for the snapshot's content-state, when it is a valid state.
    var lockScreen: String? { state.flatMap { try? ActivityState(json: $0) }.map(LockScreen.render) }

    /// The snapshot's push history, newest first.
    var pushes: [PushSummary] { state.map { PushSummary.history(of: $0).reversed() } ?? [] }

    /// A page of the registrations, sorted by token.
    func tokenPage(offset: Int, limit: Int) -> [JSONValue] {
        let sorted = tokens.keys.sorted()
        guard offset < sorted.count else { return [] }
        return sorted[offset..<min(sorted.count, offset + limit)].compactMap { tokens[$0] }
    }
}
