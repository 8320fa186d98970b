import Testing

@testable import LiveDispatchCore

/// What a partition's owner answers reads with, from a machine restored
/// from its changelogs: pages sorted by token hex, the failure a token's
/// record names, lists by id.
@Suite("partition dispatcher reads")
struct PartitionDispatcherReadsTests {
    let now = UnixTime(seconds: 1_764_000_000)

    /// A 32-byte token's hex: `pair` 32 times.
    func hex(_ pair: String) -> String { String(repeating: pair, count: 32) }

    /// A machine holding `match-1` (three tokens, one failed), `match-2`
    /// (tokens only), `cup-3` (state only) and an audience of two
    /// push-to-start tokens.
    func machine() throws -> PartitionDispatcher {
        var machine = PartitionDispatcher(partition: 4, configuration: .init())
        let match = try ActivityID("match-1")
        var state = ActivityState(activityID: match, contentState: ["score": .integer(2)], version: 3, createdAt: now)
        state.attributesType = "MatchAttributes"
        machine.restoreState(key: "match-1", value: state.json.serialized())
        machine.restoreState(key: "cup-3", value: ActivityState(activityID: try ActivityID("cup-3"), createdAt: now).json.serialized())
        let failure = TokenOutcome(result: .failed, reason: "BadDeviceToken", version: 2, event: .update, at: now)
        for (hex, outcome) in [("c3", nil), ("a1", failure), ("b2", nil)] as [(String, TokenOutcome?)] {
            let registration = TokenRegistration(activityID: match, token: try DeviceToken(hex: self.hex(hex)), registeredAt: now, lastOutcome: outcome)
            machine.restoreToken(key: registration.storeKey, value: registration.json.serialized())
        }
        let orphan = TokenRegistration(activityID: try ActivityID("match-2"), token: try DeviceToken(hex: hex("d4")), registeredAt: now)
        machine.restoreToken(key: orphan.storeKey, value: orphan.json.serialized())
        let audience = try AudienceKey("followers")
        for hex in ["f6", "e5"] {
            let registration = PushToStartRegistration(audience: audience, attributesType: "MatchAttributes", token: try DeviceToken(hex: self.hex(hex)))
            machine.restoreToken(key: registration.storeKey, value: registration.json.serialized())
        }
        _ = machine.finishRestore(now: now)
        return machine
    }

    @Test("an activity's state, and its tokens in pages sorted by hex with the failure each record names")
    func activity() throws {
        let machine = try machine()
        let first = try #require(machine.read(activity: try ActivityID("match-1"), tokensAfter: nil, limit: 2))
        #expect(first.state?.version == 3)
        #expect(first.state?.contentState == ["score": .integer(2)])
        #expect(first.tokens.count == 3)
        #expect(first.tokens.items.map(\.token.hex) == [hex("a1"), hex("b2")])
        #expect(first.tokens.items.first?.lastOutcome?.reason == "BadDeviceToken")
        #expect(first.tokens.items.last?.lastOutcome == nil)
        #expect(first.tokens.next == hex("b2"))

        let second = machine.tokenPage(of: try ActivityID("match-1"), after: hex("b2"), limit: 2)
        #expect(second.items.map(\.token.hex) == [hex("c3")])
        #expect(second.next == nil)
    }

    @Test("an activity with tokens and no state is known; one with neither is not")
    func unknown() throws {
        let machine = try machine()
        let tokensOnly = try #require(machine.read(activity: try ActivityID("match-2"), tokensAfter: nil, limit: 10))
        #expect(tokensOnly.state == nil && tokensOnly.tokens.count == 1)
        #expect(machine.read(activity: try ActivityID("match-9"), tokensAfter: nil, limit: 10) == nil)
    }

    @Test("an audience's push-to-start tokens in pages sorted by hex")
    func audience() throws {
        let machine = try machine()
        let page = machine.audiencePage(of: try AudienceKey("followers"), after: nil, limit: 1)
        #expect(page.count == 2)
        #expect(page.items.map(\.registration.token.hex) == [hex("e5")])
        #expect(page.next == hex("e5"))
        #expect(machine.audiencePage(of: try AudienceKey("followers"), after: hex("e5"), limit: 5).items.map(\.registration.token.hex) == [hex("f6")])
        #expect(machine.audiencePage(of: try AudienceKey("nobody"), after: nil, limit: 5).count == 0)
    }

    @Test("a list matches ids containing the text and shows each activity's version and token count")
    func list() throws {
        let machine = try machine()
        #expect(Set(machine.activityIDs(containing: nil).map(\.rawValue)) == ["match-1", "cup-3"])
        #expect(machine.activityIDs(containing: "atch").map(\.rawValue) == ["match-1"])
        let entry = try #require(machine.listEntry(try ActivityID("match-1")))
        #expect(entry.state.version == 3 && entry.tokens == 3)
        #expect(machine.listEntry(try ActivityID("match-2")) == nil)
    }
}
