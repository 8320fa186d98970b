import Testing

@testable import LiveDispatchCore

@Suite("per-token state in a few words")
struct CompactTokenStateTests {
    @Test("an optional date is one word and reads back as it was, none included")
    func compactDate() {
        #expect(MemoryLayout<CompactUnixTime>.stride == 8)
        for time in [nil, UnixTime(seconds: 0), UnixTime(seconds: -0.0), UnixTime(seconds: 1_764_000_000.25), UnixTime(seconds: 253_402_300_799)] {
            #expect(CompactUnixTime(time).value == time)
        }
        #expect(CompactUnixTime(UnixTime(seconds: .nan)).value == nil)
        #expect(CompactUnixTime(UnixTime(seconds: .nan)) == CompactUnixTime(nil))
        #expect(CompactUnixTime(nil).hashValue == CompactUnixTime(nil).hashValue)
        #expect(CompactUnixTime(UnixTime(seconds: 1)) != CompactUnixTime(UnixTime(seconds: 2)))
    }

    @Test("a fan-out's token state is 40 bytes and a registration 48, their dates kept")
    func layouts() {
        #expect(MemoryLayout<FanOut.TokenState>.stride <= 40)
        #expect(MemoryLayout<PartitionDispatcher.RegisteredToken>.stride <= 48)

        var state = FanOut.TokenState(done: 3)
        #expect(state.firstFailureAt == nil)
        state.firstFailureAt = UnixTime(seconds: 12.5)
        #expect(state.firstFailureAt == UnixTime(seconds: 12.5))
        state.firstFailureAt = nil
        #expect(state.firstFailureAt == nil)

        var registered = PartitionDispatcher.RegisteredToken(
            environment: .production, expiresAt: UnixTime(seconds: 100), registeredAt: nil, app: "com.example.app")
        #expect(registered.expiresAt == UnixTime(seconds: 100))
        #expect(registered.registeredAt == nil)
        registered.registeredAt = UnixTime(seconds: 7)
        registered.expiresAt = nil
        #expect(registered.registeredAt == UnixTime(seconds: 7))
        #expect(registered.expiresAt == nil)
        #expect(registered.isExpired(at: UnixTime(seconds: 1e9)) == false)
    }
}
