import LiveDispatchCore

/// Picks the newest dead letters that match a filter from records read in
/// offset order, partition by partition, within a count and a byte budget:
/// memory stays within twice `limit` letters and twice `maxBytes` bytes per
/// partition whatever the topic holds, and the answer within `maxBytes`
/// (with ``truncated`` set when a match was left out for its bytes).
/// Records that are not dead letters (a tombstone, bad JSON) are counted
/// and skipped.
struct DeadLetterQuery: Sendable {
    struct Match: Sendable, Hashable {
        var partition: Int32
        var offset: Int64
        var letter: DeadLetter
        var json: JSONValue
        /// The record's bytes, what the match adds to an answer.
        var bytes: Int
    }

    /// The bytes of dead letters one answer carries by default (4 MiB).
    static let defaultMaxBytes = 4 << 20

    let activity: String?
    let reason: String?
    let limit: Int
    let maxBytes: Int
    /// Records read so far.
    private(set) var scanned = 0
    private var kept: [Int32: [Match]] = [:]
    private var keptBytes: [Int32: Int] = [:]
    /// A match larger than the whole budget was read.
    private var oversized = false

    init(activity: String?, reason: String?, limit: Int, maxBytes: Int = defaultMaxBytes) {
        self.activity = activity
        self.reason = reason
        self.limit = max(1, limit)
        self.maxBytes = max(1, maxBytes)
    }

    /// Takes one record of the topic.
    mutating func consider(partition: Int32, offset: Int64, value: [UInt8]?) {
        scanned += 1
        guard let value, let json = try? JSONValue.parse(value), let letter = try? DeadLetter(json: json) else { return }
        if let activity, letter.activityID?.rawValue != activity { return }
        if let reason, letter.reason.rawValue != reason { return }
        guard value.count <= maxBytes else {
            oversized = true
            return
        }
        var matches = kept[partition, default: []]
        var bytes = keptBytes[partition, default: 0] + value.count
        matches.append(Match(partition: partition, offset: offset, letter: letter, json: json, bytes: value.count))
        // Offsets grow, so the oldest are first: drop them in batches, down
        // to the newest that one answer could hold.
        if matches.count >= 2 * limit || bytes > 2 * maxBytes {
            var keep = 0, keepBytes = 0
            for match in matches.reversed() {
                guard keep < limit, keepBytes + match.bytes <= maxBytes else { break }
                keep += 1
                keepBytes += match.bytes
            }
            matches.removeFirst(matches.count - keep)
            bytes = keepBytes
        }
        kept[partition] = matches
        keptBytes[partition] = bytes
    }

    /// The newest matches, newest first (by dead-letter time, then partition
    /// and offset), at most `limit` of them and `maxBytes` together.
    var newest: [Match] { page.matches }

    /// Matches held now, all partitions together.
    var keptCount: Int { kept.values.reduce(0) { $0 + $1.count } }

    /// Whether a match was left out of ``newest`` for its bytes.
    var truncated: Bool { page.truncated }

    /// ``newest`` and ``truncated`` together, from one sort.
    var page: (matches: [Match], truncated: Bool) {
        let all = kept.values.flatMap { $0.suffix(limit) }
        let sorted = all.sorted {
            ($0.letter.deadLetteredAt.seconds, $0.partition, $0.offset) > ($1.letter.deadLetteredAt.seconds, $1.partition, $1.offset)
        }
        var chosen: [Match] = []
        var bytes = 0
        for match in sorted.prefix(limit) {
            guard bytes + match.bytes <= maxBytes else { return (chosen, true) }
            chosen.append(match)
            bytes += match.bytes
        }
        return (chosen, oversized)
    }
}
