import Dispatch
import Synchronization

/// A bounded hand-off from one dedicated producer thread (a librdkafka poll
/// loop) to one Swift consumer task. The thread pushes batches; when the
/// buffer holds `capacity` elements or more it blocks until Swift takes some,
/// so memory stays bounded whatever the input rate. Swift takes everything
/// buffered at once, which keeps the per-element cost low.
final class BoundedEventBuffer<Element: Sendable>: Sendable {
    private struct State {
        var elements: [Element] = []
        var waitingConsumer: CheckedContinuation<[Element]?, Never>?
        var producerWaiting = false
        /// No more elements will be pushed.
        var finished = false
        /// Pushes never block any more (closing); elements are still kept.
        var unbounded = false
        /// The consumer is gone: pushes are dropped.
        var cancelled = false
    }

    private enum PushOutcome {
        case delivered(CheckedContinuation<[Element]?, Never>)
        case stored
        case dropped
        case wait
    }

    private enum NextOutcome {
        case take([Element], wakeProducer: Bool)
        case end
        case waiting
    }

    private let capacity: Int
    private let state = Mutex(State())
    private let room = DispatchSemaphore(value: 0)

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Pushes `batch` (from the producer thread), blocking while the buffer
    /// is full. Returns false when the consumer has gone away.
    @discardableResult
    func push(_ batch: [Element]) -> Bool {
        if batch.isEmpty { return true }
        while true {
            let outcome: PushOutcome = state.withLock { state in
                if state.cancelled || state.finished { return .dropped }
                if let consumer = state.waitingConsumer {
                    state.waitingConsumer = nil
                    return .delivered(consumer)
                }
                if state.elements.isEmpty {
                    // Take the batch's storage as it is: no per-element copies.
                    state.elements = batch
                    return .stored
                }
                if state.elements.count < capacity || state.unbounded {
                    state.elements.append(contentsOf: batch)
                    return .stored
                }
                state.producerWaiting = true
                return .wait
            }
            switch outcome {
            case .delivered(let consumer):
                consumer.resume(returning: batch)
                return true
            case .stored:
                return true
            case .dropped:
                return false
            case .wait:
                room.wait()
            }
        }
    }

    /// Whether the producer thread is waiting for room.
    var isProducerWaiting: Bool { state.withLock { $0.producerWaiting } }

    /// Removes buffered elements that were not yet handed out (from the producer thread).
    func removeAll(where predicate: (Element) -> Bool) {
        state.withLock { $0.elements.removeAll(where: predicate) }
    }

    /// Stops blocking pushes: used while closing, when the consumer may no longer read.
    func makeUnbounded() {
        let wakeProducer = state.withLock { state in
            state.unbounded = true
            defer { state.producerWaiting = false }
            return state.producerWaiting
        }
        if wakeProducer { room.signal() }
    }

    /// No more elements will come; the consumer gets what is buffered, then nil.
    func finish() {
        let consumer: CheckedContinuation<[Element]?, Never>? = state.withLock { state in
            state.finished = true
            if state.elements.isEmpty, let consumer = state.waitingConsumer {
                state.waitingConsumer = nil
                return consumer
            }
            return nil
        }
        consumer?.resume(returning: nil)
    }

    /// The consumer is gone: drop what is buffered and never block the producer again.
    func cancel() {
        let (consumer, wakeProducer) = state.withLock { state in
            state.cancelled = true
            state.elements = []
            let consumer = state.waitingConsumer
            state.waitingConsumer = nil
            defer { state.producerWaiting = false }
            return (consumer, state.producerWaiting)
        }
        consumer?.resume(returning: nil)
        if wakeProducer { room.signal() }
    }

    /// Everything buffered, waiting when nothing is; nil once finished and
    /// drained, or when the calling task is cancelled.
    func next() async -> [Element]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[Element]?, Never>) in
                let outcome: NextOutcome = state.withLock { state in
                    if !state.elements.isEmpty {
                        let taken = state.elements
                        state.elements = []
                        defer { state.producerWaiting = false }
                        return .take(taken, wakeProducer: state.producerWaiting)
                    }
                    if state.finished || state.cancelled || Task.isCancelled { return .end }
                    state.waitingConsumer = continuation
                    return .waiting
                }
                switch outcome {
                case .take(let elements, let wakeProducer):
                    if wakeProducer { room.signal() }
                    continuation.resume(returning: elements)
                case .end:
                    continuation.resume(returning: nil)
                case .waiting:
                    break
                }
            }
        } onCancel: {
            let consumer = state.withLock { state in
                defer { state.waitingConsumer = nil }
                return state.waitingConsumer
            }
            consumer?.resume(returning: nil)
        }
    }
}
