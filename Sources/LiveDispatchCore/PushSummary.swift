/// What one completed push of an activity came to: the version and event it
/// carried, how many commands it merged and how its sends ended. The
/// dispatcher keeps the newest ``historyLimit`` of each activity and writes
/// them in the activity's `state` snapshot (`pushes`), so the read API can
/// show the push history from Kafka; a restore reads them back tolerantly.
public struct PushSummary: Sendable, Hashable {
    /// How many summaries an activity keeps, newest last.
    public static let historyLimit = 10
    /// Distinct failure reasons one summary names; more are counted as `other`.
    static let reasonLimit = 8
    /// Longest reason kept, in characters.
    static let reasonLength = 64

    public var version: UInt64
    public var event: ActivityEvent
    /// When the push completed (every token delivered, pruned or given up).
    public var completedAt: UnixTime
    /// Commands merged into this push (more than one when coalesced).
    public var commands: Int
    /// Sends that APNs accepted, for this version and the older ones it completed.
    public var delivered: Int
    /// Sends that failed for good, by reason (`Unregistered`, `BadDeviceToken`, …).
    public var failed: [String: Int]

    public init(version: UInt64, event: ActivityEvent, completedAt: UnixTime, commands: Int, delivered: Int = 0, failed: [String: Int] = [:]) {
        self.version = version
        self.event = event
        self.completedAt = completedAt
        self.commands = commands
        self.delivered = delivered
        self.failed = failed
    }

    /// Sends that ended for good, counted while a push is in progress.
    struct Counts: Sendable, Hashable {
        var delivered = 0
        var failed: [String: Int] = [:]

        mutating func delivered(_ count: Int = 1) { delivered += count }

        /// A failure by reason: at most ``PushSummary/reasonLimit`` reasons
        /// of ``PushSummary/reasonLength`` characters, the rest as `other`.
        mutating func failed(_ reason: String, _ count: Int = 1) {
            let key = String(reason.prefix(PushSummary.reasonLength))
            if failed[key] == nil, failed.count >= PushSummary.reasonLimit {
                failed["other", default: 0] += count
            } else {
                failed[key, default: 0] += count
            }
        }

        mutating func add(_ other: Counts) {
            delivered(other.delivered)
            for (reason, count) in other.failed.sorted(by: { $0.key < $1.key }) { failed(reason, count) }
        }
    }

    public var json: JSONValue {
        .object([
            "version": .integer(Int64(clamping: version)), "event": .string(event.rawValue), "completed_at": .double(completedAt.seconds),
            "commands": .integer(Int64(commands)), "delivered": .integer(Int64(delivered)),
            "failed": .object(failed.mapValues { .integer(Int64($0)) }),
        ])
    }

    /// A summary as written in a snapshot, or nil when any part is not as written.
    public init?(json: JSONValue) {
        guard let version = json["version"]?.integerValue, version >= 0,
              let event = json["event"]?.stringValue.flatMap(ActivityEvent.init(rawValue:)),
              let completedAt = json["completed_at"]?.numberValue.flatMap(UnixTime.init(acceptedSeconds:)),
              let commands = json["commands"]?.integerValue.flatMap({ Int(exactly: $0) }), commands >= 0,
              let delivered = json["delivered"]?.integerValue.flatMap({ Int(exactly: $0) }), delivered >= 0
        else { return nil }
        var failed: [String: Int] = [:]
        for (reason, count) in json["failed"]?.objectValue ?? [:] {
            guard let count = count.integerValue.flatMap({ Int(exactly: $0) }), count >= 0 else { return nil }
            failed[String(reason.prefix(Self.reasonLength))] = count
        }
        guard failed.count <= Self.reasonLimit + 1 else { return nil }
        self.init(version: UInt64(version), event: event, completedAt: completedAt, commands: commands, delivered: delivered, failed: failed)
    }

    /// The push history of a snapshot (its `pushes`), oldest first: entries
    /// that are not summaries are skipped, and at most ``historyLimit`` kept.
    public static func history(of snapshot: JSONValue) -> [PushSummary] {
        guard let entries = snapshot["pushes"]?.arrayValue else { return [] }
        return Array(entries.suffix(historyLimit).compactMap(PushSummary.init(json:)))
    }
}

extension PushSummary {
    /// A state snapshot as written to the `state` topic: the state's fields
    /// and its push history under `pushes`, oldest first.
    public static func snapshot(_ state: ActivityState, history: [PushSummary]) -> JSONValue {
        guard case .object(var fields) = state.json else { return state.json }
        fields["pushes"] = .array(history.map(\.json))
        return .object(fields)
    }

    /// The bytes of ``snapshot(_:history:)`` (with the broadcast `channel`,
    /// if any), written without building the history's objects: a snapshot
    /// is written per completed push.
    public static func serializedSnapshot(_ state: ActivityState, history: [PushSummary], channel: JSONValue? = nil) -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 256 + 128 * history.count + 40 * state.commandIDs.count + 96 * state.sourceMarks.count)
        // Keys in the serializer's order (sorted by their bytes), as ``ActivityState/json`` has them.
        writer.string("activity_id", state.activityID.rawValue)
        writer.string("app", state.app)
        writer.value("attributes", state.attributes)
        writer.string("attributes_type", state.attributesType)
        writer.value("channel", channel)
        if !state.commandIDs.isEmpty { writer.array("command_digests", state.commandIDs) { $0.write(to: &$1) } }
        writer.value("content_state", state.contentState)
        writer.double("created_at", state.createdAt.seconds)
        writer.double("dismissal_date", state.dismissalDate?.seconds)
        writer.double("dismissed_at", state.dismissedAt?.seconds)
        writer.double("ended_at", state.endedAt?.seconds)
        writer.integer("last_offset", state.lastOffset)
        if !state.priority10SentAt.isEmpty {
            writer.array("priority_10_at", state.priority10SentAt) { JSONValue.writeDouble($0.seconds, to: &$1) }
        }
        writer.array("pushes", history) { $0.write(to: &$1) }
        writer.double("relevance_score", state.relevanceScore)
        if !state.sourceMarks.isEmpty { writer.array("source_marks", state.sourceMarks) { $0.write(to: &$1) } }
        writer.double("stale_date", state.staleDate?.seconds)
        writer.double("timestamp", state.timestamp?.seconds)
        writer.integer("version", Int64(clamping: state.version))
        return writer.finish()
    }

    /// Appends ``json``'s bytes, keys in the order the serializer sorts them.
    func write(to output: inout [UInt8]) {
        var writer = JSONObjectWriter(continuing: &output)
        writer.integer("commands", Int64(commands))
        writer.double("completed_at", completedAt.seconds)
        writer.integer("delivered", Int64(delivered))
        writer.string("event", event.rawValue)
        writer.value("failed", .object(failed.mapValues { .integer(Int64($0)) }))
        writer.integer("version", Int64(clamping: version))
        output = writer.finish()
    }
}
