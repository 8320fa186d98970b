import LiveDispatchCore
import Testing

@Suite("Deadline queue")
struct DeadlineQueueTests {
    @Test("an ordered queue yields its deadlines in order, ties by key, whatever the insert order, cancelled keys left out")
    func orderedWhateverTheInsertOrder() {
        var random = SplitMix64(seed: 42)
        var queue = DeadlineQueue<Int>.ordered
        var expected: [(at: Double, key: Int)] = []
        for key in 0..<2000 {
            let at = Double(random.below(500))
            queue.schedule(key, at: UnixTime(seconds: at))
            expected.append((at, key))
        }
        // Cancel every third one, as ended requests are.
        for key in 0..<2000 where key % 3 == 0 { queue.cancel(key) }
        expected.removeAll { $0.key % 3 == 0 }
        #expect(queue.count == expected.count)
        #expect(queue.storedEntries <= 2 * queue.count + 64)
        var popped: [Int] = []
        for at in 0..<500 { popped += queue.popDue(now: UnixTime(seconds: Double(at))) }
        #expect(popped == expected.sorted { ($0.at, $0.key) < ($1.at, $1.key) }.map(\.key))
        #expect(queue.count == 0)
        #expect(queue.next == nil)
    }

    @Test("an earlier deadline replaces a later one; a later one is ignored")
    func oneDeadlinePerKey() {
        var queue = DeadlineQueue<String>()
        queue.schedule("a", at: UnixTime(seconds: 10))
        queue.schedule("a", at: UnixTime(seconds: 20))
        #expect(queue.next == UnixTime(seconds: 10))
        queue.schedule("a", at: UnixTime(seconds: 5))
        #expect(queue.next == UnixTime(seconds: 5))
        #expect(queue.count == 1)
        #expect(queue.popDue(now: UnixTime(seconds: 9)) == ["a"])
        #expect(queue.popDue(now: UnixTime(seconds: 30)) == [])
    }

    @Test("cancelled entries do not pile up")
    func cancelledEntriesAreDropped() {
        var queue = DeadlineQueue<Int>()
        queue.schedule(0, at: UnixTime(seconds: 1_000))
        for key in 1..<5_000 {
            queue.schedule(key, at: UnixTime(seconds: Double(key)))
            queue.cancel(key)
            #expect(queue.storedEntries <= 2 * queue.count + 64)
        }
        #expect(queue.next == UnixTime(seconds: 1_000))
        #expect(queue.popDue(now: UnixTime(seconds: 1_000)) == [0])
    }
}
