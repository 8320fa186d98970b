import LiveDispatchCore
import Testing

/// One record with a date beyond `Int64` seconds used to trap every worker
/// that read it (issue: one record crashes every worker of a group).
@Suite("dates out of range are refused, never trapped on")
struct HostileDateTests {
    @Test("a command whose timestamp, stale_date or dismissal_date is out of range is invalid, naming the field", arguments: [
        ("timestamp", "1e300"), ("stale_date", "9.3e18"), ("dismissal_date", "1e300"), ("timestamp", "-1"),
        ("stale_date", "253402300800"), ("timestamp", "\"0000-01-01T00:00:00Z\""),
    ])
    func commandDates(field: String, value: String) throws {
        let text = #"{"activity_id":"a","content_state":{"x":1},""# + field + #"":"# + value + "}"
        #expect {
            try ActivityCommand(bytes: Array(text.utf8))
        } throws: { error in
            (error as? FieldError)?.field == field
        }
    }

    @Test("the bounds themselves are accepted: 0 (a past dismissal) and the last second of year 9999")
    func bounds() throws {
        let text = #"{"activity_id":"a","content_state":{"x":1},"timestamp":253402300799,"dismissal_date":0}"#
        let command = try ActivityCommand(bytes: Array(text.utf8))
        #expect(command.timestamp?.wholeSeconds == 253_402_300_799)
        #expect(command.dismissalDate?.wholeSeconds == 0)
    }

    @Test("a token registration with an out-of-range expires_at is refused")
    func registrationExpiry() {
        let text = #"{"activity_id":"a","token":"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff","expires_at":1e300}"#
        #expect {
            try TokenRegistration(json: JSONValue.parse(Array(text.utf8)))
        } throws: { error in
            (error as? FieldError)?.field == "expires_at"
        }
    }

    @Test("built directly, a command with an out-of-range date fails validation")
    func validation() throws {
        let command = ActivityCommand(
            activityID: try ActivityID("a"), event: .update, contentState: ["x": 1],
            timestamp: UnixTime(seconds: 1e300))
        #expect(throws: FieldError.self) { try command.validate() }
    }

    static let clamped: [(Double, Int64)] = [
        (1e300, .max), (-1e300, .min), (.infinity, .max), (-.infinity, .min), (.nan, 0), (9.3e18, .max),
        (1_764_000_000.9, 1_764_000_000),
    ]

    @Test("whole seconds are total: huge, infinite and NaN times clamp instead of trapping", arguments: clamped)
    func wholeSeconds(seconds: Double, expected: Int64) {
        #expect(UnixTime(seconds: seconds).wholeSeconds == expected)
        _ = UnixTime(seconds: seconds).iso8601
    }

    @Test("a push built from an out-of-range time encodes without trapping")
    func payload() throws {
        let push = LiveActivityPush(
            activityID: try ActivityID("a"), version: 1, event: .end, contentState: [:],
            timestamp: UnixTime(seconds: 1e300), staleDate: UnixTime(seconds: -1e300), dismissalDate: UnixTime(seconds: .nan))
        let text = String(decoding: try APNsPayload.encode(push), as: UTF8.self)
        #expect(text.contains(#""timestamp":9223372036854775807"#))
    }
}

@Suite("Saturating conversions")
struct SaturatingConversionTests {
    @Test("Doubles out of Int's range, infinities and NaN convert without trapping")
    func saturating() {
        #expect(Int(saturating: 12.9) == 12 && Int(saturating: -12.9) == -12)
        #expect(Int(saturating: 1e300) == Int.max && Int(saturating: .infinity) == Int.max)
        #expect(Int(saturating: -1e300) == Int.min && Int(saturating: .nan) == 0)
    }
}
