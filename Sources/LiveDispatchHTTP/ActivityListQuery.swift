import LiveDispatchCore
import LiveDispatchWorker

/// The activities on the `state` topic whose id contains a text, from its
/// records read in offset order: the latest snapshot of each wins and a
/// tombstone removes it. At most `maxKept` ids are held; more matches set
/// `truncated` rather than growing without bound. The listed activities'
/// tokens are then counted from the `token-store` topic.
struct ActivityListQuery: Sendable {
    struct Summary: Sendable, Hashable {
        var activityID: String
        var version: Int?
        var ended: Bool
        /// What the Lock Screen shows, when the snapshot is a valid state.
        var lockScreen: String?
        var lastPush: PushSummary?
    }

    let text: String?
    let maxKept: Int
    private(set) var truncated = false
    private var latest: [String: Summary] = [:]
    /// Registered tokens of the activities being counted (``countTokens(of:)``).
    private var tokens: [String: Set<String>] = [:]

    init(containing text: String?, maxKept: Int = 10_000) {
        self.text = text.flatMap { $0.isEmpty ? nil : $0 }
        self.maxKept = max(1, maxKept)
    }

    mutating func consider(key: [UInt8]?, value: [UInt8]?) {
        guard let key else { return }
        let id = String(decoding: key, as: UTF8.self)
        if let text, !id.contains(text) { return }
        guard let value else {
            latest[id] = nil
            return
        }
        guard let json = try? JSONValue.parse(value), case .object = json else { return }
        if latest[id] == nil, latest.count >= maxKept {
            truncated = true
            return
        }
        latest[id] = Summary(
            activityID: id, version: json["version"]?.integerValue.flatMap { Int(exactly: $0) },
            ended: json["ended_at"].map { !$0.isNull } ?? false,
            lockScreen: (try? ActivityState(json: json)).map(LockScreen.render), lastPush: PushSummary.history(of: json).last)
    }

    /// Starts counting the tokens of these activities (the ones listed).
    mutating func countTokens(of ids: [String]) {
        tokens = Dictionary(uniqueKeysWithValues: ids.map { ($0, []) })
    }

    /// Takes one `token-store` record (key: activity id, U+001F, token; a tombstone unregisters).
    mutating func tokenStoreRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key else { return }
        let parts = String(decoding: key, as: UTF8.self).split(separator: "\u{1F}", maxSplits: 1)
        guard parts.count == 2 else { return }
        let id = String(parts[0])
        guard tokens[id] != nil else { return }
        if value == nil {
            tokens[id]?.remove(String(parts[1]))
        } else {
            tokens[id]?.insert(String(parts[1]))
        }
    }

    /// Registered tokens of a counted activity.
    func tokenCount(of id: String) -> Int? { tokens[id]?.count }

    var matched: Int { latest.count }

    /// The first `limit` matches by id.
    func first(_ limit: Int) -> [Summary] {
        latest.keys.sorted().prefix(max(0, limit)).compactMap { latest[$0] }
    }
}
