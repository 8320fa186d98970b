extension APNsConnectionPool.StateMachine {
    /// Request deadlines in a binary min-heap, earliest first.
    ///
    /// Entries of requests that ended are left in place and dropped when
    /// they reach the top, or all at once by ``compact(keeping:)`` when they
    /// outnumber the live ones, so ending a request costs nothing here.
    /// Deadlines of requests that arrive in time order are appended without
    /// moving anything; a clock that steps back only costs a sift.
    struct DeadlineHeap: Sendable {
        struct Entry: Sendable, Hashable {
            var deadline: Double
            var request: RequestID
        }

        private(set) var entries: [Entry] = []

        var count: Int { entries.count }
        var earliest: Entry? { entries.first }

        mutating func insert(_ request: RequestID, deadline: Double) {
            entries.append(Entry(deadline: deadline, request: request))
            siftUp(entries.count - 1)
        }

        /// Removes and returns the earliest entry.
        mutating func popEarliest() -> Entry? {
            guard let first = entries.first else { return nil }
            let last = entries.removeLast()
            if !entries.isEmpty {
                entries[0] = last
                siftDown(0)
            }
            return first
        }

        /// Keeps only the entries `isLive` accepts.
        mutating func compact(keeping isLive: (RequestID) -> Bool) {
            entries.removeAll { !isLive($0.request) }
            var index = entries.count / 2
            while index > 0 {
                index -= 1
                siftDown(index)
            }
        }

        private static func precedes(_ lhs: Entry, _ rhs: Entry) -> Bool {
            lhs.deadline < rhs.deadline || (lhs.deadline == rhs.deadline && lhs.request < rhs.request)
        }

        private mutating func siftUp(_ start: Int) {
            var child = start
            while child > 0 {
                let parent = (child - 1) / 2
                guard Self.precedes(entries[child], entries[parent]) else { return }
                entries.swapAt(child, parent)
                child = parent
            }
        }

        private mutating func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < entries.count else { return }
                let right = left + 1
                var smallest = left
                if right < entries.count && Self.precedes(entries[right], entries[left]) { smallest = right }
                guard Self.precedes(entries[smallest], entries[parent]) else { return }
                entries.swapAt(smallest, parent)
                parent = smallest
            }
        }
    }
}
