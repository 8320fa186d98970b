import LiveDispatchCore

/// The activities on the `state` topic whose id contains a text, from its
/// records read in offset order: the latest snapshot of each wins and a
/// tombstone removes it. At most `maxKept` ids are held; more matches set
/// `truncated` rather than growing without bound.
struct ActivityListQuery: Sendable {
    struct Summary: Sendable, Hashable {
        var activityID: String
        var version: Int?
        var ended: Bool
    }

    let text: String?
    let maxKept: Int
    private(set) var truncated = false
    private var latest: [String: Summary] = [:]

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
            ended: json["ended_at"].map { !$0.isNull } ?? false)
    }

    var matched: Int { latest.count }

    /// The first `limit` matches by id.
    func first(_ limit: Int) -> [Summary] {
        latest.keys.sorted().prefix(max(0, limit)).compactMap { latest[$0] }
    }
}
