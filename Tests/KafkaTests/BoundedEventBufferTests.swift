import Foundation
@testable import Kafka
import Synchronization
import Testing

@Suite("Bounded event buffer between the poll thread and Swift")
struct BoundedEventBufferTests {
    @Test func keepsOrderAndBlocksTheProducerWhenFull() async throws {
        let buffer = BoundedEventBuffer<Int>(capacity: 4)
        let pushed = Atomic<Int>(0)
        let producerDone = Atomic<Bool>(false)
        let thread = Thread {
            for batch in 0..<10 {
                buffer.push(Array(batch * 3..<batch * 3 + 3))
                pushed.add(1, ordering: .sequentiallyConsistent)
            }
            producerDone.store(true, ordering: .sequentiallyConsistent)
            buffer.finish()
        }
        thread.start()
        // With room for 4, the producer stores two batches (3, then 3 more since 3 < 4) and then waits.
        try await waitFor("the producer to block on a full buffer") {
            buffer.isProducerWaiting ? true : nil
        }
        let pushedWhileBlocked = pushed.load(ordering: .sequentiallyConsistent)
        let doneWhileBlocked = producerDone.load(ordering: .sequentiallyConsistent)
        #expect(pushedWhileBlocked == 2)
        #expect(!doneWhileBlocked)
        var received: [Int] = []
        while let batch = await buffer.next() {
            #expect(batch.count <= 6)
            received += batch
        }
        #expect(received == Array(0..<30))
        let done = producerDone.load(ordering: .sequentiallyConsistent)
        #expect(done)
    }

    @Test func cancelledConsumerReleasesABlockedProducer() async throws {
        let buffer = BoundedEventBuffer<Int>(capacity: 1)
        let results = Mutex<[Bool]>([])
        let thread = Thread {
            for value in 0..<3 {
                let accepted = buffer.push([value])
                results.withLock { $0.append(accepted) }
            }
        }
        thread.start()
        try await waitFor("the producer to block") { buffer.isProducerWaiting ? true : nil }
        buffer.cancel()
        try await waitFor("the producer to finish") { results.withLock { $0.count } == 3 ? true : nil }
        #expect(results.withLock { $0 } == [true, false, false])
        #expect(await buffer.next() == nil)
    }

    @Test func removesRecordsNotYetHandedOut() async {
        let buffer = BoundedEventBuffer<Int>(capacity: 10)
        buffer.push([1, 2, 3, 4])
        buffer.removeAll { $0 % 2 == 0 }
        buffer.finish()
        #expect(await buffer.next() == [1, 3])
        #expect(await buffer.next() == nil)
    }
}
