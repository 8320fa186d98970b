/// Everything LiveDispatch remembers about one activity: the snapshot the
/// dispatcher writes to the compacted `state` topic after each completed
/// push, and restores from it when it takes over a partition.
public struct ActivityState: Sendable, Hashable {
    public var activityID: ActivityID
    /// The full merged `content-state` as of ``version``.
    public var contentState: JSONValue
    /// Number of pushes flushed for this activity so far; grows by one per push.
    public var version: UInt64
    /// The last `aps.timestamp` sent; timestamps never go below it.
    public var timestamp: UnixTime?
    public var staleDate: UnixTime?
    public var dismissalDate: UnixTime?
    public var relevanceScore: Double?
    public var attributesType: String?
    public var attributes: JSONValue?
    /// When the activity was first seen; it expires `activity.max_age` later.
    public var createdAt: UnixTime
    /// When an `end` was applied; nil while the activity is live.
    public var endedAt: UnixTime?
    /// When the ended activity was dismissed: this state is then only its
    /// marker (``ActivityLifecycle/Marker``), with no content, kept so the
    /// id stays ended until `activity.max_age` after its end.
    public var dismissedAt: UnixTime?
    /// Offset in the `commands` partition of the last command folded into
    /// this state. Re-delivered commands at or below it are already applied.
    public var lastOffset: Int64?
    /// Digests of the ids of the commands folded into this state, oldest
    /// first, so a repeat of one is acknowledged and not applied
    /// (`idempotency.*`).
    public var commandIDs: [RememberedCommand] = []
    /// How far the router-made commands of each domain partition have been
    /// applied (``SourceMark``), least recently fed first: they stand for
    /// those commands' ids, which are not in ``commandIDs``.
    public var sourceMarks: [SourceMark] = []
    /// When the priority-10 pushes of the last hour were flushed, oldest
    /// first (the priority budget), at most the budget's count.
    public var priority10SentAt: [UnixTime] = []
    /// The app the activity belongs to, from the first command naming one
    /// (or the only app's); its priority budget applies.
    public var app: String?

    /// A command id, as its 64-bit digest, and when it was applied: 16
    /// bytes, where the id itself (a routed command's is
    /// `<topic>/<partition>@<offset>/<rule>`) would take a heap string of
    /// 50 to 200 bytes, 256 times per activity. Two ids of one activity
    /// with the same digest inside the window would make the second count
    /// as a repeat: a chance of about 1 in 10^16 per command.
    public struct RememberedCommand: Sendable, Hashable {
        public var digest: UInt64
        public var appliedAt: UnixTime

        public init(id: String, appliedAt: UnixTime) {
            self.init(digest: Self.digest(id), appliedAt: appliedAt)
        }

        public init(digest: UInt64, appliedAt: UnixTime) {
            self.digest = digest
            self.appliedAt = appliedAt
        }

        public static func digest(_ id: String) -> UInt64 { FNV1a.hash(id) }

        /// The snapshot's form: 16 hexadecimal digits, `@`, Unix seconds.
        var text: String {
            let hex = String(digest, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex + "@" + appliedAt.seconds.description
        }

        /// Appends ``text`` as a JSON string, without building it.
        func write(to output: inout [UInt8]) {
            output.append(UInt8(ascii: "\""))
            for shift in stride(from: 60, through: 0, by: -4) {
                let nibble = UInt8(truncatingIfNeeded: digest >> UInt64(shift)) & 0x0F
                output.append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
            }
            output.append(UInt8(ascii: "@"))
            JSONValue.writeDescription(appliedAt.seconds, to: &output)
            output.append(UInt8(ascii: "\""))
        }

        init?(text: String) {
            let parts = text.split(separator: "@", maxSplits: 1)
            guard parts.count == 2, parts[0].utf8.count == 16, let digest = UInt64(parts[0], radix: 16),
                  let seconds = Double(parts[1]), let appliedAt = UnixTime(acceptedSeconds: seconds)
            else { return nil }
            self.init(digest: digest, appliedAt: appliedAt)
        }
    }

    public init(
        activityID: ActivityID, contentState: JSONValue = .object([:]), version: UInt64 = 0, timestamp: UnixTime? = nil,
        staleDate: UnixTime? = nil, dismissalDate: UnixTime? = nil, relevanceScore: Double? = nil,
        attributesType: String? = nil, attributes: JSONValue? = nil, createdAt: UnixTime, endedAt: UnixTime? = nil,
        lastOffset: Int64? = nil
    ) {
        self.activityID = activityID
        self.contentState = contentState
        self.version = version
        self.timestamp = timestamp
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.attributesType = attributesType
        self.attributes = attributes
        self.createdAt = createdAt
        self.endedAt = endedAt
        self.lastOffset = lastOffset
    }

    public var isEnded: Bool { endedAt != nil }

    /// The marker a dismissed activity leaves in the `state` changelog.
    public init(marker: ActivityLifecycle.Marker, of activityID: ActivityID, createdAt: UnixTime) {
        self.init(
            activityID: activityID, version: marker.version, timestamp: marker.timestamp, createdAt: createdAt, endedAt: marker.endedAt,
            lastOffset: marker.lastOffset)
        dismissedAt = marker.dismissedAt
    }

    public init(json: JSONValue) throws(FieldError) {
        let reader = try FieldReader(json, what: "an activity state")
        activityID = try reader.requiredActivityID("activity_id")
        contentState = try reader.object("content_state") ?? .object([:])
        guard let version = try reader.integer("version"), version >= 0 else {
            throw FieldError(field: "version", message: "expected a push count (0 or more)")
        }
        self.version = UInt64(version)
        timestamp = try reader.date("timestamp")
        staleDate = try reader.date("stale_date")
        dismissalDate = try reader.date("dismissal_date")
        relevanceScore = try reader.number("relevance_score")
        attributesType = try reader.string("attributes_type")
        attributes = try reader.object("attributes")
        guard let createdAt = try reader.date("created_at") else {
            throw FieldError(field: "created_at", message: "is required")
        }
        self.createdAt = createdAt
        endedAt = try reader.date("ended_at")
        dismissedAt = try reader.date("dismissed_at")
        lastOffset = try reader.integer("last_offset")
        app = try reader.appName()
        for (index, entry) in try reader.array("command_ids").enumerated() {
            let item = try FieldReader(entry, path: "command_ids[\(index)]", what: "a remembered command")
            guard let appliedAt = try item.date("at") else {
                throw FieldError(field: item.name("at"), message: "is required")
            }
            commandIDs.append(RememberedCommand(id: try item.requiredString("id"), appliedAt: appliedAt))
        }
        for (index, entry) in try reader.array("command_digests").enumerated() {
            guard let text = entry.stringValue, let remembered = RememberedCommand(text: text) else {
                throw FieldError(
                    field: "command_digests[\(index)]",
                    message: "expected 16 hexadecimal digits, @ and a date as Unix seconds, got \(entry.typeName)")
            }
            commandIDs.append(remembered)
        }
        for (index, entry) in try reader.array("source_marks").enumerated() {
            sourceMarks.append(try SourceMark(json: entry, path: "source_marks[\(index)]"))
        }
        for (index, entry) in try reader.array("priority_10_at").enumerated() {
            guard let seconds = entry.numberValue, let time = UnixTime(acceptedSeconds: seconds) else {
                throw FieldError(field: "priority_10_at[\(index)]", message: "expected a date as Unix seconds, got \(entry.typeName)")
            }
            priority10SentAt.append(time)
        }
    }

    /// Whether a command with this id was applied at or after `since`.
    public func remembers(_ commandID: String, since: UnixTime) -> Bool {
        let digest = RememberedCommand.digest(commandID)
        return commandIDs.contains { $0.digest == digest && $0.appliedAt >= since }
    }

    /// Remembers a command id, forgetting ids applied before `since` and the
    /// oldest beyond `limit`.
    public mutating func remember(_ commandID: String, at now: UnixTime, since: UnixTime, limit: Int) {
        let digest = RememberedCommand.digest(commandID)
        commandIDs.removeAll { $0.appliedAt < since || $0.digest == digest }
        guard limit > 0 else { return }
        // Kept to the millisecond: every snapshot writes each remembered
        // id's time, and a time of three decimals is written digit by digit
        // (``JSONValue/writeDescription(_:to:)``), not through `description`.
        commandIDs.append(RememberedCommand(digest: digest, appliedAt: Self.millisecond(now)))
        if commandIDs.count > limit { commandIDs.removeFirst(commandIDs.count - limit) }
    }

    public init(bytes: [UInt8]) throws(FieldError) {
        try self.init(json: try FieldReader.parse(bytes))
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "activity_id": .string(activityID.rawValue), "content_state": contentState,
            "version": .integer(Int64(clamping: version)), "created_at": .double(createdAt.seconds),
        ]
        if let timestamp { fields["timestamp"] = .double(timestamp.seconds) }
        if let staleDate { fields["stale_date"] = .double(staleDate.seconds) }
        if let dismissalDate { fields["dismissal_date"] = .double(dismissalDate.seconds) }
        if let relevanceScore { fields["relevance_score"] = .double(relevanceScore) }
        if let attributesType { fields["attributes_type"] = .string(attributesType) }
        if let attributes { fields["attributes"] = attributes }
        if let endedAt { fields["ended_at"] = .double(endedAt.seconds) }
        if let dismissedAt { fields["dismissed_at"] = .double(dismissedAt.seconds) }
        if let lastOffset { fields["last_offset"] = .integer(lastOffset) }
        if let app { fields["app"] = .string(app) }
        if !commandIDs.isEmpty {
            fields["command_digests"] = .array(commandIDs.map { .string($0.text) })
        }
        if !sourceMarks.isEmpty { fields["source_marks"] = .array(sourceMarks.map(\.json)) }
        if !priority10SentAt.isEmpty { fields["priority_10_at"] = .array(priority10SentAt.map { .double($0.seconds) }) }
        return .object(fields)
    }
}
