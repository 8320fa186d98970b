@testable import Kafka
import Testing

@Suite("Consumer assignment state machine")
struct AssignmentStateTests {
    let a0 = TopicPartition(topic: "a", partition: 0)
    let a1 = TopicPartition(topic: "a", partition: 1)
    let b0 = TopicPartition(topic: "b", partition: 0)

    @Test func incrementalAssignAndRevokeTrackTheAssignment() {
        var state = KafkaConsumer.AssignmentState()
        #expect(state.assigned([a1, a0]) == .assign([a0, a1]))
        #expect(state.assigned([b0]) == .assign([b0]))
        #expect(state.assigned == [a0, a1, b0])
        #expect(state.revoked([a1], lost: false) == .revoke([a1], commitFirst: true))
        #expect(state.assigned == [a0, b0])
        #expect(state.revoked([a0, b0], lost: true) == .revoke([a0, b0], commitFirst: false))
        #expect(state.assigned.isEmpty)
    }

    @Test func onlyAssignedPartitionsArePausedAndRevocationForgetsPauses() {
        var state = KafkaConsumer.AssignmentState()
        _ = state.assigned([a0, a1])
        #expect(state.pause([a0, b0]) == .apply([a0]))
        #expect(state.pause([a0]) == .apply([]))
        #expect(state.paused == [a0])
        #expect(state.resume([a0, a1]) == .apply([a0]))
        #expect(state.paused.isEmpty)
        #expect(state.pause([a0, a1]) == .apply([a0, a1]))
        _ = state.revoked([a0], lost: false)
        #expect(state.paused == [a1])
        // Assigned again later: it starts unpaused.
        _ = state.assigned([a0])
        #expect(state.paused == [a1])
        #expect(state.resume([a0]) == .apply([]))
    }

    @Test func closingHappensOnceAndRejectsPauses() {
        var state = KafkaConsumer.AssignmentState()
        _ = state.assigned([a0])
        #expect(state.closeRequested() == .close)
        #expect(state.closeRequested() == .none)
        #expect(state.pause([a0]) == .rejectClosed)
        #expect(state.resume([a0]) == .rejectClosed)
        state.closed()
        #expect(state.assigned.isEmpty)
        #expect(state.closeRequested() == .none)
    }
}
