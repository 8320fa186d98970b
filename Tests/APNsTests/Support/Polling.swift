import Foundation
import Synchronization

/// A counter tasks share.
final class Tally: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    func raise(to value: Int) { count.withLock { $0 = max($0, value) } }
    var value: Int { count.withLock { $0 } }
}
