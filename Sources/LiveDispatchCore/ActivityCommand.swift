/// What happens to a Live Activity: `start`, `update` or `end`.
public enum ActivityEvent: String, Sendable, Hashable, CaseIterable {
    case start
    case update
    case end
}

/// APNs delivery priority: 10 sends at once and counts against the device's
/// budget, 5 is opportunistic, 1 is the lowest.
public struct PushPriority: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: Int

    public static let low = PushPriority(unchecked: 1)
    public static let normal = PushPriority(unchecked: 5)
    public static let immediate = PushPriority(unchecked: 10)

    public init(_ rawValue: Int) throws(ValueError) {
        guard [1, 5, 10].contains(rawValue) else {
            throw ValueError("priority \(rawValue) is not one APNs accepts (1, 5 or 10)")
        }
        self.rawValue = rawValue
    }

    private init(unchecked rawValue: Int) { self.rawValue = rawValue }

    public static func < (lhs: PushPriority, rhs: PushPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { String(rawValue) }
}

/// The visible alert of a push: `title`, `body` (each text or a localized
/// key with arguments, ``AlertText``) and an optional `sound`.
public struct ActivityAlert: Sendable, Hashable {
    public var title: AlertText
    public var body: AlertText
    public var sound: String?

    public init(title: AlertText, body: AlertText, sound: String? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = ["title": title.json, "body": body.json]
        if let sound { fields["sound"] = .string(sound) }
        return .object(fields)
    }

    /// Appends ``json``'s bytes (`wire`: localized texts as APNs spells
    /// them), keys in the serializer's order.
    func write(to output: inout [UInt8], wire: Bool = false) {
        var writer = JSONObjectWriter(continuing: &output)
        writer.member("body", body) { $0.write(to: &$1, wire: wire) }
        writer.string("sound", sound)
        writer.member("title", title) { $0.write(to: &$1, wire: wire) }
        output = writer.finish()
    }

    static let fieldNames: Set<String> = ["title", "body", "sound"]

    init(json: JSONValue, path: String) throws(FieldError) {
        let reader = try FieldReader(json, path: path, what: "an alert")
        try reader.rejectUnknown(Self.fieldNames)
        title = try AlertText(json: try reader.required("title"), path: reader.name("title"))
        body = try AlertText(json: try reader.required("body"), path: reader.name("body"))
        sound = try reader.string("sound")
    }
}

/// Where a command came from: the domain record and the rule that made it.
public struct CommandSource: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var rule: String?

    public init(topic: String, partition: Int32, offset: Int64, rule: String? = nil) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.rule = rule
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "topic": .string(topic), "partition": .integer(Int64(partition)), "offset": .integer(offset),
        ]
        if let rule { fields["rule"] = .string(rule) }
        return .object(fields)
    }

    /// The id of the command a rule made of this event: the same event
    /// routed again (a router re-reading after a crash or a rebalance) makes
    /// a command with the same id, which the dispatcher then does not apply
    /// twice. At most ``ActivityCommand/maxIDBytes``; a longer one (a long
    /// topic or rule name) is replaced by a hash of it.
    public var commandID: String {
        let full = "\(topic)/\(partition)@\(offset)/\(rule ?? "")"
        guard full.utf8.count > ActivityCommand.maxIDBytes else { return full }
        return "event-" + String(FNV1a.hash(full), radix: 16) + "@\(offset)"
    }

    /// Appends ``json``'s bytes, keys in the serializer's order.
    func write(to output: inout [UInt8]) {
        var writer = JSONObjectWriter(continuing: &output)
        writer.integer("offset", offset)
        writer.integer("partition", Int64(partition))
        writer.string("rule", rule)
        writer.string("topic", topic)
        output = writer.finish()
    }

    static let fieldNames: Set<String> = ["topic", "partition", "offset", "rule"]

    init(json: JSONValue, path: String) throws(FieldError) {
        let reader = try FieldReader(json, path: path, what: "a source")
        try reader.rejectUnknown(Self.fieldNames)
        topic = try reader.requiredString("topic")
        (partition, offset) = try reader.kafkaPosition()
        rule = try reader.string("rule")
    }
}

extension FieldReader {
    /// A record's place in Kafka, both required: `partition` (a partition
    /// number, 0 or more) and `offset` (0 or more).
    func kafkaPosition() throws(FieldError) -> (partition: Int32, offset: Int64) {
        guard let partition = try integer("partition"), let narrow = Int32(exactly: partition), narrow >= 0 else {
            throw FieldError(field: name("partition"), message: "expected a partition number (0 or more)")
        }
        guard let offset = try integer("offset"), offset >= 0 else {
            throw FieldError(field: name("offset"), message: "expected an offset (0 or more)")
        }
        return (narrow, offset)
    }
}

/// A change to one Live Activity: the public contract of the `commands`
/// topic, with Braze's field names. Rules produce these; backends may write
/// them directly.
///
/// `contentState` is a JSON merge patch (RFC 7386) on the activity's current
/// state unless `replaceState` is true.
public struct ActivityCommand: Sendable, Hashable {
    /// Optional idempotency id given by the producer: a repeat within
    /// `idempotency.window` is acknowledged and not applied.
    public var id: String?
    /// Longest command id, in UTF-8 bytes.
    public static let maxIDBytes = 200
    public var activityID: ActivityID
    public var event: ActivityEvent
    public var contentState: JSONValue?
    public var replaceState: Bool
    /// Event time; becomes `aps.timestamp`. When absent, the record's time is used.
    public var timestamp: UnixTime?
    public var priority: PushPriority?
    public var staleDate: UnixTime?
    public var dismissalDate: UnixTime?
    public var relevanceScore: Double?
    public var alert: ActivityAlert?
    /// Required for `start`: the Swift type name of the app's `ActivityAttributes`.
    public var attributesType: String?
    /// Required for `start`: the static attributes.
    public var attributes: JSONValue?
    /// iOS 18 push-to-start: ask the new activity for an update token (`input-push-token: 1`).
    public var inputPushToken: Bool?
    /// iOS 18 broadcast: the channel the started activity subscribes to.
    public var inputPushChannel: String?
    /// For `start`: the audiences whose push-to-start tokens (of
    /// `attributesType`) are sent the start, with `input-push-token: 1`.
    public var audiences: [AudienceKey]
    /// The app the activity belongs to (`apps:`); nil for the only app. A
    /// start names it when the deployment has several; the activity keeps
    /// it (its priority budget, the push-to-start tokens a start reaches).
    public var app: String?
    /// For `start`: the activity is broadcast (iOS 18): its partition
    /// creates a channel for it and sends its updates and end to the channel.
    public var broadcast: Bool?
    /// For a broadcast start: the channel's storage policy (default
    /// ``ChannelStoragePolicy/defaultForActivities``).
    public var storagePolicy: ChannelStoragePolicy?
    public var source: CommandSource?
    /// The W3C trace context of the record that carried the command (its
    /// Kafka headers), not part of its JSON.
    public var trace: TraceContext?

    /// Most audiences one start may address.
    public static let maxAudiences = 100

    public init(
        id: String? = nil, activityID: ActivityID, event: ActivityEvent = .update, contentState: JSONValue? = nil,
        replaceState: Bool = false, timestamp: UnixTime? = nil, priority: PushPriority? = nil,
        staleDate: UnixTime? = nil, dismissalDate: UnixTime? = nil, relevanceScore: Double? = nil,
        alert: ActivityAlert? = nil, attributesType: String? = nil, attributes: JSONValue? = nil,
        inputPushToken: Bool? = nil, inputPushChannel: String? = nil, audiences: [AudienceKey] = [],
        app: String? = nil, source: CommandSource? = nil, broadcast: Bool? = nil, storagePolicy: ChannelStoragePolicy? = nil
    ) {
        self.id = id
        self.app = app
        self.activityID = activityID
        self.event = event
        self.contentState = contentState
        self.replaceState = replaceState
        self.timestamp = timestamp
        self.priority = priority
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.alert = alert
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
        self.audiences = audiences
        self.source = source
        self.broadcast = broadcast
        self.storagePolicy = storagePolicy
    }

    static let fieldNames: Set<String> = [
        "id", "activity_id", "event", "content_state", "replace_state", "timestamp", "priority", "stale_date",
        "dismissal_date", "relevance_score", "alert", "attributes_type", "attributes", "input_push_token",
        "input_push_channel", "audiences", "app", "source", "broadcast", "storage_policy",
    ]

    /// Reads a command from its JSON form, naming the field of any problem.
    /// A `start` must carry `alert`, `attributes_type` and `attributes`.
    /// With `apps`, the app is checked: a named one must be configured, and
    /// a start names one when there are several.
    public init(json: JSONValue, apps: AppDirectory = .unchecked) throws(FieldError) {
        let reader = try FieldReader(json, what: "an activity command")
        try reader.rejectUnknown(Self.fieldNames)
        id = try reader.string("id")
        if let id, id.isEmpty || id.utf8.count > Self.maxIDBytes {
            throw FieldError(field: "id", message: "a command id is 1 to \(Self.maxIDBytes) bytes, got \(id.utf8.count)")
        }
        activityID = try reader.requiredActivityID("activity_id")
        if let eventName = try reader.string("event") {
            guard let event = ActivityEvent(rawValue: eventName) else {
                throw FieldError(field: "event", message: "\(eventName.debugDescription) is not an event (expected update, end or start)")
            }
            self.event = event
        } else {
            event = .update
        }
        contentState = try reader.object("content_state")
        replaceState = try reader.bool("replace_state") ?? false
        timestamp = try reader.date("timestamp")
        if let rawPriority = try reader.integer("priority") {
            do {
                priority = try PushPriority(Int(clamping: rawPriority))
            } catch {
                throw FieldError(field: "priority", message: error.message)
            }
        } else {
            priority = nil
        }
        staleDate = try reader.date("stale_date")
        dismissalDate = try reader.date("dismissal_date")
        relevanceScore = try reader.number("relevance_score")
        alert = try reader.optional("alert").map { value throws(FieldError) in try ActivityAlert(json: value, path: "alert") }
        attributesType = try reader.string("attributes_type")
        attributes = try reader.object("attributes")
        inputPushToken = try reader.bool("input_push_token")
        inputPushChannel = try reader.string("input_push_channel")
        audiences = try Self.audiences(reader)
        app = try reader.appName()
        _ = try apps.resolve(app, required: event == .start)
        source = try reader.optional("source").map { value throws(FieldError) in try CommandSource(json: value, path: "source") }
        broadcast = try reader.bool("broadcast")
        storagePolicy = try Self.storagePolicy(reader)
        try validate()
    }

    private static func audiences(_ reader: FieldReader) throws(FieldError) -> [AudienceKey] {
        guard let value = reader.optional("audiences") else { return [] }
        guard case .array(let items) = value else { throw reader.mismatch("audiences", expected: "an array of audience keys", got: value) }
        guard items.count <= maxAudiences else {
            throw FieldError(field: reader.name("audiences"), message: "names \(items.count) audiences, more than \(maxAudiences)")
        }
        var keys: [AudienceKey] = []
        for (index, item) in items.enumerated() {
            let field = reader.name("audiences[\(index)]")
            guard let text = item.stringValue else { throw FieldError(field: field, message: "expected an audience key (a string), got \(item.typeName)") }
            do {
                keys.append(try AudienceKey(text))
            } catch {
                throw FieldError(field: field, message: error.message)
            }
        }
        return keys
    }

    /// `storage_policy`: 0, 1, "no-storage" or "most-recent".
    private static func storagePolicy(_ reader: FieldReader) throws(FieldError) -> ChannelStoragePolicy? {
        guard let value = reader.optional("storage_policy") else { return nil }
        let text: String
        switch value {
        case .string(let string): text = string
        case .integer(let number): text = String(number)
        default: throw reader.mismatch("storage_policy", expected: "0, 1, \"no-storage\" or \"most-recent\"", got: value)
        }
        do {
            return try ChannelStoragePolicy(parsing: text)
        } catch {
            throw FieldError(field: reader.name("storage_policy"), message: error.message)
        }
    }

    /// The command as the router writes it: one a rule made without an `id`
    /// takes its source's ``CommandSource/commandID``, so the same event
    /// routed again (after a crash or a rebalance) is applied once.
    public var routed: ActivityCommand {
        var command = self
        if command.id == nil { command.id = command.source?.commandID }
        return command
    }

    /// Checks the rules that span fields.
    public func validate() throws(FieldError) {
        if replaceState && contentState == nil {
            throw FieldError(field: "content_state", message: "is required when replace_state is true")
        }
        if event == .start {
            if alert == nil { throw FieldError(field: "alert", message: "is required for a start") }
            if attributesType == nil { throw FieldError(field: "attributes_type", message: "is required for a start") }
            if attributes == nil { throw FieldError(field: "attributes", message: "is required for a start") }
        }
        if broadcast != nil, event != .start {
            throw FieldError(field: "broadcast", message: "is only for a start (the start creates the activity's channel)")
        }
        if storagePolicy != nil, broadcast != true {
            throw FieldError(field: "storage_policy", message: "is only for a start with broadcast true")
        }
        if broadcast == true, inputPushChannel != nil {
            throw FieldError(field: "input_push_channel", message: "give broadcast true (the worker creates the channel) or input_push_channel, not both")
        }
        if !audiences.isEmpty {
            if event != .start { throw FieldError(field: "audiences", message: "is only for a start (push-to-start tokens start activities)") }
            if audiences.count > Self.maxAudiences {
                throw FieldError(field: "audiences", message: "names \(audiences.count) audiences, more than \(Self.maxAudiences)")
            }
            if Set(audiences).count != audiences.count { throw FieldError(field: "audiences", message: "names an audience twice") }
        }
        if let relevanceScore, !relevanceScore.isFinite {
            throw FieldError(field: "relevance_score", message: "must be a finite number")
        }
        for (field, date) in [("timestamp", timestamp), ("stale_date", staleDate), ("dismissal_date", dismissalDate)] {
            if let date, !date.isAccepted {
                throw FieldError(field: field, message: "\(date.seconds) is not a date between 1970-01-01 and 9999-12-31 (Unix seconds 0 to 253402300799)")
            }
        }
    }

    /// The command's JSON form, as written to the `commands` topic.
    /// The bytes of ``json``, written member by member in its key order
    /// without building the object: the router writes one per routed event.
    public func serialized() -> [UInt8] {
        var writer = JSONObjectWriter()
        // Keys in the serializer's order (sorted by their bytes).
        writer.string("activity_id", activityID.rawValue)
        writer.member("alert", alert) { $0.write(to: &$1) }
        writer.string("app", app)
        writer.value("attributes", attributes)
        writer.string("attributes_type", attributesType)
        if !audiences.isEmpty { writer.value("audiences", .array(audiences.map { .string($0.rawValue) })) }
        writer.bool("broadcast", broadcast)
        writer.value("content_state", contentState)
        writer.double("dismissal_date", dismissalDate?.seconds)
        writer.string("event", event.rawValue)
        writer.string("id", id)
        writer.string("input_push_channel", inputPushChannel)
        writer.bool("input_push_token", inputPushToken)
        writer.integer("priority", priority.map { Int64($0.rawValue) })
        writer.double("relevance_score", relevanceScore)
        if replaceState { writer.bool("replace_state", true) }
        writer.member("source", source) { $0.write(to: &$1) }
        writer.double("stale_date", staleDate?.seconds)
        writer.string("storage_policy", storagePolicy?.description)
        writer.double("timestamp", timestamp?.seconds)
        return writer.finish()
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = ["activity_id": .string(activityID.rawValue), "event": .string(event.rawValue)]
        if let id { fields["id"] = .string(id) }
        if let contentState { fields["content_state"] = contentState }
        if replaceState { fields["replace_state"] = .bool(true) }
        if let timestamp { fields["timestamp"] = .double(timestamp.seconds) }
        if let priority { fields["priority"] = .integer(Int64(priority.rawValue)) }
        if let staleDate { fields["stale_date"] = .double(staleDate.seconds) }
        if let dismissalDate { fields["dismissal_date"] = .double(dismissalDate.seconds) }
        if let relevanceScore { fields["relevance_score"] = .double(relevanceScore) }
        if let alert { fields["alert"] = alert.json }
        if let attributesType { fields["attributes_type"] = .string(attributesType) }
        if let attributes { fields["attributes"] = attributes }
        if let inputPushToken { fields["input_push_token"] = .bool(inputPushToken) }
        if let inputPushChannel { fields["input_push_channel"] = .string(inputPushChannel) }
        if !audiences.isEmpty { fields["audiences"] = .array(audiences.map { .string($0.rawValue) }) }
        if let app { fields["app"] = .string(app) }
        if let source { fields["source"] = source.json }
        if let broadcast { fields["broadcast"] = .bool(broadcast) }
        if let storagePolicy { fields["storage_policy"] = .string(storagePolicy.description) }
        return .object(fields)
    }
}
