/// The wake-ups a state machine owes itself, earliest first: a binary heap
/// with at most one live deadline per key. Asking for a later deadline for a
/// key that already has an earlier one keeps the earlier (the machine is
/// asked again when it fires and says what is next); asking for an earlier
/// one replaces it.
///
/// Superseded and cancelled entries stay in the heap and are skipped when
/// they reach the top, or dropped all at once when they outnumber the live
/// ones, so cancelling costs a dictionary removal. Deadlines scheduled in
/// time order are appended without moving anything.
///
/// Keys due at the same instant come out in heap order, or in the order of
/// `tieBreak` when the queue was made with one (``ordered`` for comparable
/// keys).
public struct DeadlineQueue<Key: Hashable & Sendable>: Sendable {
    private struct Entry: Sendable {
        var at: UnixTime
        var key: Key
    }

    private var heap: [Entry] = []
    private var live: [Key: UnixTime] = [:]
    private let tieBreak: (@Sendable (Key, Key) -> Bool)?

    /// A queue whose keys due at the same instant come out in heap order.
    public init() { tieBreak = nil }

    /// A queue whose keys due at the same instant come out in the order
    /// `precedes` gives.
    public init(tieBreak precedes: @escaping @Sendable (Key, Key) -> Bool) { tieBreak = precedes }

    /// Keys with a deadline.
    public var count: Int { live.count }

    /// Entries held, superseded and cancelled ones included; never more than
    /// `2 · count + 64` after a ``cancel(_:)``.
    public var storedEntries: Int { heap.count }

    /// The earliest live deadline.
    public var next: UnixTime? {
        mutating get {
            dropSuperseded()
            return heap.first?.at
        }
    }

    /// Wake up for `key` at `at`, unless it already wakes up no later.
    public mutating func schedule(_ key: Key, at: UnixTime) {
        if let current = live[key], current <= at { return }
        live[key] = at
        push(Entry(at: at, key: key))
    }

    /// Forgets `key`'s deadline.
    public mutating func cancel(_ key: Key) {
        guard live.removeValue(forKey: key) != nil else { return }
        if heap.count > 2 * live.count + 64 { compact() }
    }

    /// Removes and returns the keys due at `now`, earliest first.
    public mutating func popDue(now: UnixTime) -> [Key] {
        var due: [Key] = []
        while let first = heap.first, first.at <= now {
            pop()
            if live[first.key] == first.at {
                live.removeValue(forKey: first.key)
                due.append(first.key)
            }
        }
        return due
    }

    private mutating func dropSuperseded() {
        while let first = heap.first, live[first.key] != first.at { pop() }
    }

    /// Keeps only the live entries and restores the heap order.
    private mutating func compact() {
        heap.removeAll { live[$0.key] != $0.at }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    private func precedes(_ lhs: Entry, _ rhs: Entry) -> Bool {
        if lhs.at < rhs.at { return true }
        guard let tieBreak, lhs.at == rhs.at else { return false }
        return tieBreak(lhs.key, rhs.key)
    }

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(0)
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            let right = left + 1
            var smallest = left
            if right < heap.count, precedes(heap[right], heap[left]) { smallest = right }
            guard precedes(heap[smallest], heap[parent]) else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}

extension DeadlineQueue where Key: Comparable {
    /// A queue whose keys due at the same instant come out smallest first.
    public static var ordered: Self { DeadlineQueue(tieBreak: { $0 < $1 }) }
}
