/// The wake-ups a state machine owes itself, earliest first: a binary heap
/// with at most one live deadline per key. Asking for a later deadline for a
/// key that already has an earlier one keeps the earlier (the machine is
/// asked again when it fires and says what is next); asking for an earlier
/// one replaces it. Superseded entries stay in the heap and are skipped.
public struct DeadlineQueue<Key: Hashable & Sendable>: Sendable {
    private struct Entry: Sendable {
        var at: UnixTime
        var key: Key
    }

    private var heap: [Entry] = []
    private var live: [Key: UnixTime] = [:]

    public init() {}

    /// Keys with a deadline.
    public var count: Int { live.count }

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
        live.removeValue(forKey: key)
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

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count, heap[right].at < heap[smallest].at { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
