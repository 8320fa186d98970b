import LiveDispatchCore
import Testing

@Suite struct TraceContextTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func theSpecificationsExampleIsReadAndWrittenBack() throws {
        let context = try #require(TraceContext(traceparent: Self.valid, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"))
        #expect(context.traceIDHigh == 0x4bf9_2f35_77b3_4da6)
        #expect(context.traceIDLow == 0xa3ce_929d_0e0e_4736)
        #expect(context.spanID == 0x00f0_67aa_0ba9_02b7)
        #expect(context.isSampled)
        #expect(context.traceparent == Self.valid)
        #expect(context.traceState == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        #expect(context.headers.map(\.name) == ["traceparent", "tracestate"])
        #expect(context.traceIDHex == "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    @Test func leadingZerosAndUnsampledFlagsSurviveTheRoundTrip() throws {
        let text = "00-0000000000000001000000000000000a-000000000000000f-00"
        let context = try #require(TraceContext(traceparent: text, tracestate: nil))
        #expect(!context.isSampled)
        #expect(context.traceparent == text)
        #expect(context.headers.count == 1)
    }

    @Test(arguments: [
        "",
        "00",
        // All-zero trace id, all-zero span id.
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        // Uppercase hex, a wrong separator, a short field, a long one.
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
        // Version ff is invalid; version 00 takes nothing after the flags.
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        // A later version's extra fields must follow a dash.
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ])
    func malformedParentsAreRefused(_ text: String) {
        #expect(TraceContext(traceparent: text, tracestate: nil) == nil)
    }

    @Test func aLaterVersionKeepsTheFieldsItKnows() throws {
        let context = try #require(TraceContext(
            traceparent: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", tracestate: nil))
        #expect(context.traceparent == Self.valid)
    }

    @Test func aBadTraceStateIsDroppedAndTheParentKept() throws {
        let long = String(repeating: "a", count: TraceContext.maximumTraceStateLength + 1)
        for state in [long, "vendor=\u{7F}", "vendor=é", "   "] {
            let context = try #require(TraceContext(traceparent: Self.valid, tracestate: state))
            #expect(context.traceState.isEmpty)
        }
        let trimmed = try #require(TraceContext(traceparent: Self.valid, tracestate: "  a=b \t"))
        #expect(trimmed.traceState == "a=b")
    }

    @Test func everyByteStringIsReadWithoutTrapping() {
        // Hostile input: random lengths around the valid one, random bytes,
        // and single-byte mutations of a valid header.
        var random = SplitMix64(seed: 3_500)
        let valid = Array(Self.valid.utf8)
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round.isMultiple(of: 2) {
                bytes = (0..<random.below(80)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            } else {
                bytes = valid
                bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next())
            }
            let state = (0..<random.below(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            if let context = TraceContext(traceparent: bytes, tracestate: state) {
                // Whatever is accepted writes a header that reads back the same.
                #expect(TraceContext(traceparent: context.traceparent, tracestate: context.traceState) == context)
            }
        }
        #expect(TraceContext(traceparent: [UInt8](repeating: 0x30, count: 100_000), tracestate: nil) == nil)
    }

    @Test func anInvalidContextCannotBeMade() {
        #expect(TraceContext(traceIDHigh: 0, traceIDLow: 0, spanID: 1, flags: 1) == nil)
        #expect(TraceContext(traceIDHigh: 1, traceIDLow: 0, spanID: 0, flags: 1) == nil)
        #expect(TraceContext(traceIDHigh: 0, traceIDLow: 1, spanID: 1, flags: 1)?.withSpanID(0) == nil)
    }
}
