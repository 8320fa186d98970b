import LiveDispatchBench
import Testing

@Suite("Delivery audit")
struct DeliveryAuditTests {
    typealias State = DeliveryAudit.State

    private func audit(_ expected: [String: State] = ["a": State(version: 3, ended: true), "b": State(version: 3, ended: true)]) -> DeliveryAudit {
        DeliveryAudit(expected: expected)
    }

    @Test func inOrderDeliveriesEndingAtTheFinalStatePass() {
        var audit = audit()
        for token in ["a", "b"] {
            audit.record(token: token, state: State(version: 1, ended: false))
            audit.record(token: token, state: State(version: 3, ended: false))
            audit.record(token: token, state: State(version: 3, ended: true))
        }
        #expect(audit.everyTokenAtFinalState)
        #expect(audit.tokensAtFinalState == 2)
        #expect(audit.olderAfterNewer == 0)
        #expect(audit.duplicates == 0)
        #expect(audit.deliveries == 6)
        #expect(audit.duplicatePercent == 0)
    }

    @Test func aLowerVersionAfterAHigherOneIsOlderAfterNewer() {
        var audit = audit()
        audit.record(token: "a", state: State(version: 2, ended: false))
        audit.record(token: "a", state: State(version: 1, ended: false))
        audit.record(token: "a", state: State(version: 3, ended: true))
        #expect(audit.olderAfterNewer == 1)
        #expect(audit.duplicates == 0)
    }

    @Test func anUpdateAfterTheEndIsOlderAfterNewerAndLeavesTheTokenShort() {
        var audit = audit()
        audit.record(token: "a", state: State(version: 3, ended: true))
        audit.record(token: "a", state: State(version: 4, ended: false))
        #expect(audit.olderAfterNewer == 1)
        // The device shows what came last: not the final state.
        #expect(audit.tokensAtFinalState == 0)
        #expect(audit.tokensShort(limit: 5).map(\.token) == ["a", "b"])
        #expect(audit.tokensShort(limit: 5).first?.last == State(version: 4, ended: false))
        #expect(audit.tokensShort(limit: 5).last?.last == nil)
    }

    @Test func anOlderStateDeliveredAgainCountsAsOlderAfterNewerNotDuplicate() {
        var audit = audit()
        audit.record(token: "a", state: State(version: 1, ended: false))
        audit.record(token: "a", state: State(version: 2, ended: false))
        audit.record(token: "a", state: State(version: 1, ended: false))
        #expect(audit.olderAfterNewer == 1)
        #expect(audit.duplicates == 0)
    }

    @Test func theSameStateTwiceIsADuplicateAndStillFinal() {
        var audit = audit(["a": State(version: 3, ended: true)])
        audit.record(token: "a", state: State(version: 3, ended: true))
        audit.record(token: "a", state: State(version: 3, ended: true))
        audit.record(token: "a", state: State(version: 3, ended: true))
        audit.record(token: "a", state: State(version: 3, ended: true))
        #expect(audit.duplicates == 3)
        #expect(audit.olderAfterNewer == 0)
        #expect(audit.duplicatePercent == 75)
        #expect(audit.everyTokenAtFinalState)
    }

    @Test func aTokenStoppedShortOfTheEndIsNotAtItsFinalState() {
        var audit = audit()
        audit.record(token: "a", state: State(version: 3, ended: true))
        audit.record(token: "b", state: State(version: 3, ended: false))
        #expect(!audit.everyTokenAtFinalState)
        #expect(audit.tokensAtFinalState == 1)
        #expect(audit.tokensShort(limit: 1).map(\.token) == ["b"])
        #expect(audit.tokensShortWithoutDeadLetter([]) == 1)
        #expect(audit.tokensShortWithoutDeadLetter(["b"]) == 0)
        #expect(audit.tokensShortWithoutDeadLetter(["a"]) == 1)
    }

    @Test func deliveriesToUnknownTokensAreCountedApart() {
        var audit = audit(["a": State(version: 1, ended: true)])
        audit.record(token: "z", state: State(version: 9, ended: false))
        audit.record(token: "a", state: State(version: 1, ended: true))
        #expect(audit.unexpected == 1)
        #expect(audit.deliveries == 2)
        #expect(audit.everyTokenAtFinalState)
    }

    @Test func noDeliveriesMeansNoTokenAtItsFinalState() {
        let audit = audit()
        #expect(audit.tokensAtFinalState == 0)
        #expect(audit.duplicatePercent == 0)
        #expect(!audit.everyTokenAtFinalState)
    }
}
