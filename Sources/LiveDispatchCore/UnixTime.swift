/// A point in time as Unix seconds, the unit of every date on the wire
/// (`aps.timestamp`, `stale-date`, `dismissal-date`, `expires_at`).
public struct UnixTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Double

    public init(seconds: Double) { self.seconds = seconds }

    /// The dates LiveDispatch accepts from input: 1970-01-01T00:00:00Z through
    /// 9999-12-31T23:59:59Z. The lower bound is 0 because a past
    /// `dismissal_date` (often 0) is how a backend asks for an ended activity to
    /// go at once; the upper bound catches milliseconds sent as seconds.
    public static let acceptedRange: ClosedRange<Double> = 0...253_402_300_799

    /// A time read from input, or nil when `seconds` is not finite or lies
    /// outside ``acceptedRange``.
    public init?(acceptedSeconds seconds: Double) {
        guard seconds.isFinite, UnixTime.acceptedRange.contains(seconds) else { return nil }
        self.seconds = seconds
    }

    /// Whether this time lies in ``acceptedRange``.
    public var isAccepted: Bool { seconds.isFinite && UnixTime.acceptedRange.contains(seconds) }

    /// Whole seconds, rounded down, as APNs expects dates. Total: a time beyond
    /// `Int64` clamps to its bounds and NaN gives 0, so no value can trap here.
    public var wholeSeconds: Int64 {
        let whole = seconds.rounded(.down)
        guard !whole.isNaN else { return 0 }
        return Int64(exactly: whole) ?? (whole > 0 ? .max : .min)
    }

    public static func < (lhs: UnixTime, rhs: UnixTime) -> Bool { lhs.seconds < rhs.seconds }

    public static func + (lhs: UnixTime, rhs: Double) -> UnixTime { UnixTime(seconds: lhs.seconds + rhs) }

    public static func - (lhs: UnixTime, rhs: UnixTime) -> Double { lhs.seconds - rhs.seconds }

    public var description: String { iso8601 }

    /// Parses an ISO-8601 / RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS`, an
    /// optional fraction, and `Z` or an offset `±HH:MM` (`±HHMM`). A date
    /// alone (`YYYY-MM-DD`) means midnight UTC. Returns nil for anything else.
    public init?(iso8601 text: String) {
        var scanner = DigitScanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.expect(UInt8(ascii: "-")),
              let month = scanner.number(digits: 2), scanner.expect(UInt8(ascii: "-")),
              let day = scanner.number(digits: 2),
              (1...12).contains(month), (1...UnixTime.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var seconds = Double(UnixTime.daysFromCivil(year: year, month: month, day: day) * 86_400)
        if scanner.isAtEnd {
            self.seconds = seconds
            return
        }
        guard scanner.expect(UInt8(ascii: "T")) || scanner.expect(UInt8(ascii: "t")) || scanner.expect(UInt8(ascii: " ")),
              let hour = scanner.number(digits: 2), scanner.expect(UInt8(ascii: ":")),
              let minute = scanner.number(digits: 2), scanner.expect(UInt8(ascii: ":")),
              let second = scanner.number(digits: 2),
              hour < 24, minute < 60, second < 61
        else { return nil }
        seconds += Double(hour * 3600 + minute * 60 + second)
        if scanner.expect(UInt8(ascii: ".")) || scanner.expect(UInt8(ascii: ",")) {
            guard let fraction = scanner.fraction() else { return nil }
            seconds += fraction
        }
        if scanner.expect(UInt8(ascii: "Z")) || scanner.expect(UInt8(ascii: "z")) {
            // UTC
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.number(digits: 2) else { return nil }
            _ = scanner.expect(UInt8(ascii: ":"))
            guard let offsetMinutes = scanner.number(digits: 2), offsetHours < 24, offsetMinutes < 60 else { return nil }
            seconds -= Double(sign * (offsetHours * 3600 + offsetMinutes * 60))
        } else {
            return nil
        }
        guard scanner.isAtEnd else { return nil }
        self.seconds = seconds
    }

    /// The time as `YYYY-MM-DDTHH:MM:SSZ` (fraction dropped); a time before
    /// year 0 or after year 9999 shows as that bound.
    public var iso8601: String {
        let whole = min(max(wholeSeconds, -62_167_219_200), 253_402_300_799)
        let days = Int(whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400)
        let secondOfDay = Int(whole - Int64(days) * 86_400)
        let (year, month, day) = UnixTime.civil(fromDays: days)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))Z"
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

private struct DigitScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { index == bytes.count }

    mutating func number(digits: Int) -> Int? {
        guard bytes.count - index >= digits else { return nil }
        var value = 0
        for _ in 0..<digits {
            let byte = bytes[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            index += 1
        }
        return value
    }

    mutating func fraction() -> Double? {
        var value = 0.0
        var scale = 0.1
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            value += Double(bytes[index] - UInt8(ascii: "0")) * scale
            scale /= 10
            index += 1
        }
        return index > start ? value : nil
    }

    mutating func expect(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func sign() -> Int? {
        if expect(UInt8(ascii: "+")) { return 1 }
        if expect(UInt8(ascii: "-")) { return -1 }
        return nil
    }
}

extension Int {
    /// `value` rounded toward zero, saturated to Int's range; 0 for NaN. A
    /// conversion that cannot trap, for counts and rates computed in Double.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9.2e18 {
            self = Int.max
        } else if value <= -9.2e18 {
            self = Int.min
        } else {
            self = Int(exactly: value.rounded(.towardZero)) ?? 0
        }
    }
}

/// A `UnixTime?` in one word instead of two (a `Double` and the optional's
/// tag, padded): NaN stands for none. For state kept per token, by the
/// million. A time whose seconds are NaN reads back as none.
struct CompactUnixTime: Sendable, Hashable {
    /// The seconds' bit pattern, so that equality and hashing are bitwise
    /// (NaN would never equal itself as a `Double`).
    private var bits: UInt64

    init(_ time: UnixTime?) {
        bits = (time?.seconds).flatMap { $0.isNaN ? nil : $0.bitPattern } ?? Self.none
    }

    var value: UnixTime? { bits == Self.none ? nil : UnixTime(seconds: Double(bitPattern: bits)) }

    private static let none = Double.nan.bitPattern
}
