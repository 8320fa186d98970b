/// Who reads an internal topic from Kafka next: one read runs at a time
/// (each opens Kafka clients and reads partitions to their end), the others
/// wait in arrival order. Each caller (API key, or the keyless loopback
/// reads together) has at most one read running or waiting, so a caller
/// that sends many is refused its extra ones instead of locking the others
/// out; at most `capacity` callers wait.
struct ScanQueue: Sendable {
    /// What became of a request to read.
    enum Admission: Sendable, Equatable {
        /// Nothing else runs: read now.
        case run
        /// Wait until ``leave(_:)`` or ``cancel(_:)`` names this ticket.
        case wait
        /// The caller already has a read running or waiting.
        case callerBusy
        /// `capacity` callers already wait.
        case full
    }

    let capacity: Int
    private var running: (ticket: UInt64, caller: String)?
    private var waiting: [(ticket: UInt64, caller: String)] = []

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var waitingCount: Int { waiting.count }

    /// A caller asks to read, under a ticket of its own.
    mutating func enter(_ ticket: UInt64, caller: String) -> Admission {
        if running?.caller == caller || waiting.contains(where: { $0.caller == caller }) { return .callerBusy }
        guard running != nil else {
            running = (ticket, caller)
            return .run
        }
        guard waiting.count < capacity else { return .full }
        waiting.append((ticket, caller))
        return .wait
    }

    /// The running read is done: the ticket that runs next, if any waits.
    mutating func leave(_ ticket: UInt64) -> UInt64? {
        guard running?.ticket == ticket else { return nil }
        running = nil
        guard !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        running = next
        return next.ticket
    }

    /// A waiting caller left (its client went away): it no longer waits.
    /// Returns whether it was waiting; a running ticket is left with ``leave(_:)``.
    mutating func cancel(_ ticket: UInt64) -> Bool {
        guard let index = waiting.firstIndex(where: { $0.ticket == ticket }) else { return false }
        waiting.remove(at: index)
        return true
    }
}
