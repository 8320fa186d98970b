import LiveDispatchCore
@testable import LiveDispatchWorker
import Testing

@Suite("Router back-pressure")
struct RouterBackpressureTests {
    @Test("the worker's dispatching backlog counts with the router's own records; a draining router never resumes")
    func downstreamBacklog() throws {
        var state = Router.State(gate: BackpressureGate(highWatermark: 10, lowWatermark: 4))
        #expect(state.backpressure(downstream: 9) == .none)
        #expect(state.backpressure(downstream: 10) == .pause, "the dispatcher's backlog alone reaches the high watermark")
        #expect(state.backpressure(downstream: 5) == .none, "between the watermarks it stays paused")
        #expect(state.backpressure(downstream: 4) == .resume)
        let events = OffsetTracker.Partition(topic: "sports.scores", number: 0)
        state.tracker.assign(events)
        try state.tracker.read(events, offset: 7)
        #expect(state.backpressure(downstream: 9) == .pause, "one event of its own and nine waiting to be dispatched")
        state.draining = true
        #expect(state.backpressure(downstream: 0) == .none, "shutting down: the partitions stay paused")
    }
}
