import LiveDispatchCore

/// Picks the newest dead letters that match a filter from records read in
/// offset order, partition by partition. Memory stays within twice `limit`
/// per partition whatever the topic holds; records that are not dead
/// letters (a tombstone, bad JSON) are counted and skipped.
struct DeadLetterQuery: Sendable {
    struct Match: Sendable, Hashable {
        var partition: Int32
        var offset: Int64
        var letter: DeadLetter
        var json: JSONValue
    }

    let activity: String?
    let reason: String?
    let limit: Int
    /// Records read so far.
    private(set) var scanned = 0
    private var kept: [Int32: [Match]] = [:]

    init(activity: String?, reason: String?, limit: Int) {
        self.activity = activity
        self.reason = reason
        self.limit = max(1, limit)
    }

    /// Takes one record of the topic.
    mutating func consider(partition: Int32, offset: Int64, value: [UInt8]?) {
        scanned += 1
        guard let value, let json = try? JSONValue.parse(value), let letter = try? DeadLetter(json: json) else { return }
        if let activity, letter.activityID?.rawValue != activity { return }
        if let reason, letter.reason.rawValue != reason { return }
        var matches = kept[partition, default: []]
        matches.append(Match(partition: partition, offset: offset, letter: letter, json: json))
        // Offsets grow, so the oldest are first: drop them in batches.
        if matches.count >= 2 * limit { matches.removeFirst(matches.count - limit) }
        kept[partition] = matches
    }

    /// The newest matches, newest first: by dead-letter time, then partition and offset.
    var newest: [Match] {
        let all = kept.values.flatMap { $0.suffix(limit) }
        let sorted = all.sorted {
            ($0.letter.deadLetteredAt.seconds, $0.partition, $0.offset) > ($1.letter.deadLetteredAt.seconds, $1.partition, $1.offset)
        }
        return Array(sorted.prefix(limit))
    }
}
