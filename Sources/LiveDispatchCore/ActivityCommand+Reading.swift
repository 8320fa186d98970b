extension ActivityCommand {
    /// Parses a command from the bytes of a Kafka record value.
    ///
    /// A command of the members the router writes (an update or an end:
    /// `activity_id`, `alert`, `content_state`, the dates, `event`, `id`,
    /// `priority`, `relevance_score`, `replace_state`, `source`) is read
    /// member by member, without building the JSON object around it; only
    /// `content_state` becomes a ``JSONValue``. Anything else (another
    /// member, a `null`, a date as text, an error of any kind) is read again
    /// through ``init(json:apps:)``, which gives every command and names the
    /// field of every error, so both ways give the same command or the same
    /// error (held together by a randomized test).
    public init(bytes: [UInt8], apps: AppDirectory = .unchecked) throws(FieldError) {
        if let command = bytes.withUnsafeBufferPointer({ Self.readDirectly($0) }) {
            self = command
            return
        }
        try self.init(json: try FieldReader.parse(bytes), apps: apps)
    }

    /// The members read directly, each with its bit in the set of those seen.
    private enum Member: UInt32, CaseIterable, NamedMember {
        static let table = allCases

        case activityID = 1
        case alert = 2
        case contentState = 4
        case dismissalDate = 8
        case event = 16
        case id = 32
        case priority = 64
        case relevanceScore = 128
        case replaceState = 256
        case source = 512
        case staleDate = 1024
        case timestamp = 2048

        var name: StaticString {
            switch self {
            case .activityID: "activity_id"
            case .alert: "alert"
            case .contentState: "content_state"
            case .dismissalDate: "dismissal_date"
            case .event: "event"
            case .id: "id"
            case .priority: "priority"
            case .relevanceScore: "relevance_score"
            case .replaceState: "replace_state"
            case .source: "source"
            case .staleDate: "stale_date"
            case .timestamp: "timestamp"
            }
        }
    }

    /// The command in `buffer` when it is one the direct reading covers and
    /// is valid; nil sends it through the full reader.
    static func readDirectly(_ buffer: UnsafeBufferPointer<UInt8>) -> ActivityCommand? {
        guard buffer.count <= JSONParseLimits.default.maxBytes else { return nil }
        var parser = JSONParser(bytes: buffer, limits: .default)
        var seen: UInt32 = 0
        var id: String?
        var activityID: ActivityID?
        var event = ActivityEvent.update
        var contentState: JSONValue?
        var replaceState = false
        var timestamp: UnixTime?
        var priority: PushPriority?
        var staleDate: UnixTime?
        var dismissalDate: UnixTime?
        var relevanceScore: Double?
        var alert: ActivityAlert?
        var source: CommandSource?
        let complete = parser.readMembers(of: Member.self, seen: &seen) { parser, member in
            switch member {
            case .activityID:
                guard let text = parser.directString(), let value = try? ActivityID(text) else { return false }
                activityID = value
            case .event:
                guard let text = parser.directString(), let value = ActivityEvent(rawValue: text), value != .start else { return false }
                event = value
            case .id:
                guard let text = parser.directString(), !text.isEmpty, text.utf8.count <= Self.maxIDBytes else { return false }
                id = text
            case .contentState:
                guard parser.next == UInt8(ascii: "{"), let value = try? parser.parseValue(depth: 1) else { return false }
                contentState = value
            case .replaceState:
                guard let value = try? parser.parseValue(depth: 1), case .bool(let flag) = value else { return false }
                replaceState = flag
            case .timestamp:
                guard let value = parser.directTime() else { return false }
                timestamp = value
            case .staleDate:
                guard let value = parser.directTime() else { return false }
                staleDate = value
            case .dismissalDate:
                guard let value = parser.directTime() else { return false }
                dismissalDate = value
            case .priority:
                guard let value = parser.directInteger(), let level = try? PushPriority(Int(clamping: value)) else { return false }
                priority = level
            case .relevanceScore:
                guard let value = parser.directNumber() else { return false }
                relevanceScore = value
            case .alert:
                guard let value = parser.directAlert() else { return false }
                alert = value
            case .source:
                guard let value = parser.directSource() else { return false }
                source = value
            }
            return true
        }
        guard complete, let activityID else { return nil }
        let command = ActivityCommand(
            id: id, activityID: activityID, event: event, contentState: contentState, replaceState: replaceState, timestamp: timestamp,
            priority: priority, staleDate: staleDate, dismissalDate: dismissalDate, relevanceScore: relevanceScore, alert: alert,
            source: source)
        do {
            try command.validate()
        } catch {
            return nil
        }
        return command
    }
}

/// Reading members straight from the bytes, for ``ActivityCommand/readDirectly(_:)``:
/// each gives nil (or false) for anything it does not cover, never an error.
extension JSONParser {
    /// The byte at the reading position, if any.
    var next: UInt8? { isAtEnd ? nil : bytes[index] }

    /// Reads an object whose member names are all among `Member`'s, each
    /// at most once, handing each value to `read` at its first byte; true
    /// once the object and everything after it (whitespace only) is read
    /// at the top level, or the nested object's closing brace is passed.
    mutating func readMembers<Member: NamedMember>(
        of _: Member.Type, seen: inout UInt32, topLevel: Bool = true, _ read: (inout JSONParser, Member) -> Bool
    ) -> Bool {
        skipWhitespace()
        guard next == UInt8(ascii: "{") else { return false }
        index += 1
        skipWhitespace()
        guard next != UInt8(ascii: "}") else { return false }
        while true {
            skipWhitespace()
            guard next == UInt8(ascii: "\"") else { return false }
            index += 1
            let start = index
            while let byte = next, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { index += 1 }
            guard next == UInt8(ascii: "\"") else { return false }
            let key = UnsafeBufferPointer(rebasing: bytes[start..<index])
            index += 1
            guard let member = Member.table.first(where: { $0.matches(key) }), seen & member.rawValue == 0 else { return false }
            seen |= member.rawValue
            skipWhitespace()
            guard next == UInt8(ascii: ":") else { return false }
            index += 1
            skipWhitespace()
            // A null is "absent" to the full reader: left to it.
            guard let first = next, first != UInt8(ascii: "n"), read(&self, member) else { return false }
            skipWhitespace()
            switch next {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "}"):
                index += 1
                guard topLevel else { return true }
                skipWhitespace()
                return isAtEnd
            default:
                return false
            }
        }
    }

    mutating func directString() -> String? {
        guard next == UInt8(ascii: "\"") else { return nil }
        return try? parseString()
    }

    /// A number as the full reader's `number`: an integer or a fraction, as a `Double`.
    mutating func directNumber() -> Double? {
        guard let first = next, first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
              let value = try? parseNumber()
        else { return nil }
        return value.numberValue
    }

    /// An integer written as one (a whole fraction such as `5.0` is left to the full reader).
    mutating func directInteger() -> Int64? {
        guard let first = next, first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
              let value = try? parseNumber(), case .integer(let integer) = value
        else { return nil }
        return integer
    }

    /// A date as Unix seconds (dates as text are left to the full reader).
    mutating func directTime() -> UnixTime? {
        directNumber().flatMap { UnixTime(acceptedSeconds: $0) }
    }

    mutating func directAlert() -> ActivityAlert? {
        var seen: UInt32 = 0
        var title: String?
        var body: String?
        var sound: String?
        let complete = readMembers(of: AlertMember.self, seen: &seen, topLevel: false) { parser, member in
            guard let text = parser.directString() else { return false }
            switch member {
            case .title: title = text
            case .body: body = text
            case .sound: sound = text
            }
            return true
        }
        guard complete, let title, let body else { return nil }
        return ActivityAlert(title: .text(title), body: .text(body), sound: sound)
    }

    mutating func directSource() -> CommandSource? {
        var seen: UInt32 = 0
        var topic: String?
        var partition: Int32?
        var offset: Int64?
        var rule: String?
        let complete = readMembers(of: SourceMember.self, seen: &seen, topLevel: false) { parser, member in
            switch member {
            case .topic:
                guard let text = parser.directString() else { return false }
                topic = text
            case .rule:
                guard let text = parser.directString() else { return false }
                rule = text
            case .partition:
                guard let value = parser.directInteger(), let narrow = Int32(exactly: value), narrow >= 0 else { return false }
                partition = narrow
            case .offset:
                guard let value = parser.directInteger(), value >= 0 else { return false }
                offset = value
            }
            return true
        }
        guard complete, let topic, let partition, let offset else { return nil }
        return CommandSource(topic: topic, partition: partition, offset: offset, rule: rule)
    }
}

/// A member name the direct reading recognises by its bytes.
protocol NamedMember: RawRepresentable where RawValue == UInt32 {
    var name: StaticString { get }
    /// Every member, made once.
    static var table: [Self] { get }
}

extension NamedMember {
    func matches(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        let name = self.name
        return key.count == name.utf8CodeUnitCount && key.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }
}

private enum AlertMember: UInt32, CaseIterable, NamedMember {
    static let table = allCases
    case title = 1
    case body = 2
    case sound = 4

    var name: StaticString {
        switch self {
        case .title: "title"
        case .body: "body"
        case .sound: "sound"
        }
    }
}

private enum SourceMember: UInt32, CaseIterable, NamedMember {
    static let table = allCases
    case topic = 1
    case partition = 2
    case offset = 4
    case rule = 8

    var name: StaticString {
        switch self {
        case .topic: "topic"
        case .partition: "partition"
        case .offset: "offset"
        case .rule: "rule"
        }
    }
}
