@testable import LiveDispatchHTTP
import LiveDispatchCore
import Testing

@Suite("Dead letter query")
struct DeadLetterQueryTests {
    func letter(_ activity: String, _ reason: DeadLetterReason, at seconds: Double) -> [UInt8] {
        DeadLetter(reason: reason, message: "m", activityID: try? ActivityID(activity), deadLetteredAt: UnixTime(seconds: seconds)).json.serialized()
    }

    @Test("keeps the newest matches, newest first, across partitions")
    func newest() {
        var query = DeadLetterQuery(activity: "a", reason: nil, limit: 3)
        for offset in 0..<100 {
            query.consider(partition: 0, offset: Int64(offset), value: letter("a", .activityEnded, at: Double(1000 + offset)))
            query.consider(partition: 1, offset: Int64(offset), value: letter("b", .activityEnded, at: Double(5000 + offset)))
        }
        query.consider(partition: 2, offset: 0, value: letter("a", .invalidCommand, at: 1050.5))
        #expect(query.scanned == 201)
        #expect(query.newest.map(\.letter.deadLetteredAt.seconds) == [1099, 1098, 1097])
        #expect(query.newest.map(\.partition) == [0, 0, 0])
    }

    @Test("filters by reason; tombstones and records that are not dead letters are skipped")
    func filters() {
        var query = DeadLetterQuery(activity: nil, reason: "invalid-command", limit: 10)
        query.consider(partition: 0, offset: 0, value: nil)
        query.consider(partition: 0, offset: 1, value: Array("not json".utf8))
        query.consider(partition: 0, offset: 2, value: Array(#"{"unexpected": true}"#.utf8))
        query.consider(partition: 0, offset: 3, value: letter("a", .activityEnded, at: 10))
        query.consider(partition: 0, offset: 4, value: letter("a", .invalidCommand, at: 11))
        #expect(query.scanned == 5)
        #expect(query.newest.map(\.offset) == [4])
    }

    @Test("a limit below 1 is taken as 1")
    func limit() {
        var query = DeadLetterQuery(activity: nil, reason: nil, limit: 0)
        query.consider(partition: 0, offset: 0, value: letter("a", .activityEnded, at: 1))
        query.consider(partition: 0, offset: 1, value: letter("a", .activityEnded, at: 2))
        #expect(query.newest.map(\.offset) == [1])
    }
}

@Suite("Dead letter query, bounded in bytes")
struct DeadLetterQueryBytesTests {
    func letter(_ activity: String, at seconds: Double, padding: Int = 0) -> [UInt8] {
        DeadLetter(
            reason: .invalidCommand, message: String(repeating: "x", count: padding), activityID: try? ActivityID(activity),
            deadLetteredAt: UnixTime(seconds: seconds)
        ).json.serialized()
    }

    @Test("an answer carries at most maxBytes of letters, newest first, and says it was cut")
    func capped() {
        let size = letter("a", at: 39, padding: 1_000).count
        var query = DeadLetterQuery(activity: nil, reason: nil, limit: 500, maxBytes: size * 5 + size / 2)
        for offset in 0..<40 {
            query.consider(partition: Int32(offset % 3), offset: Int64(offset), value: letter("a", at: Double(offset), padding: 1_000))
        }
        #expect(query.newest.count == 5)
        #expect(query.newest.map(\.letter.deadLetteredAt.seconds) == [39, 38, 37, 36, 35])
        #expect(query.newest.reduce(0) { $0 + $1.bytes } <= query.maxBytes)
        #expect(query.truncated)
    }

    @Test("what fits is not marked cut; a letter larger than the whole budget is left out and marks the answer cut")
    func fitsAndOversized() {
        let size = letter("a", at: 1).count
        var query = DeadLetterQuery(activity: nil, reason: nil, limit: 10, maxBytes: size * 10)
        for offset in 0..<3 { query.consider(partition: 0, offset: Int64(offset), value: letter("a", at: Double(offset))) }
        #expect(query.newest.count == 3)
        #expect(!query.truncated)
        query.consider(partition: 1, offset: 0, value: letter("a", at: 99, padding: size * 10))
        #expect(query.newest.count == 3)
        #expect(query.truncated)
    }

    @Test("memory per partition stays within twice the budget however many large letters match")
    func boundedMemory() {
        // The largest letter of the run (its time has the most digits), so any three fit.
        let size = letter("a", at: 299, padding: 10_000).count
        var query = DeadLetterQuery(activity: nil, reason: nil, limit: 500, maxBytes: size * 3)
        for offset in 0..<300 { query.consider(partition: 0, offset: Int64(offset), value: letter("a", at: Double(offset), padding: 10_000)) }
        #expect(query.newest.map(\.offset) == [299, 298, 297])
        #expect(query.keptCount <= 6)
    }
}
