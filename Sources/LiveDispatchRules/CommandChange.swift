import LiveDispatchCore

/// Where an event was read: its topic, partition and offset.
public struct EventPosition: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public var offset: Int64

    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }

    public init(_ record: EventRecord) {
        self.init(topic: record.topic, partition: record.partition, offset: record.offset)
    }

    public var description: String { "\(topic)[\(partition)]@\(offset)" }

    public var json: JSONValue {
        .object(["topic": .string(topic), "partition": .integer(Int64(partition)), "offset": .integer(offset)])
    }
}

/// One field that differs: a dotted path (`alert.body`,
/// `content_state.teamOneScore`) and its value on each side, nil where the
/// field is absent.
public struct FieldChange: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var before: JSONValue?
    public var after: JSONValue?

    public init(path: String, before: JSONValue?, after: JSONValue?) {
        self.path = path
        self.before = before
        self.after = after
    }

    public var description: String {
        "\(path): \(before.map { $0.serializedString() } ?? "(absent)") → \(after.map { $0.serializedString() } ?? "(absent)")"
    }

    public var json: JSONValue {
        .object(["path": .string(path), "before": before ?? .null, "after": after ?? .null])
    }

    /// The fields that differ between two JSON values, flattened to dotted
    /// paths through objects (an array is one field), sorted by path.
    public static func between(_ before: JSONValue?, _ after: JSONValue?, prefix: String = "") -> [FieldChange] {
        var changes: [FieldChange] = []
        collect(before, after, path: prefix, into: &changes)
        return changes.sorted { $0.path < $1.path }
    }

    private static func collect(_ before: JSONValue?, _ after: JSONValue?, path: String, into changes: inout [FieldChange]) {
        if before == after { return }
        let beforeFields = before?.objectValue
        let afterFields = after?.objectValue
        // Objects (or an absent side) are compared field by field; anything
        // else, and an empty object against nothing, is one field.
        let recurse = (before == nil || beforeFields != nil) && (after == nil || afterFields != nil)
            && !((beforeFields ?? [:]).isEmpty && (afterFields ?? [:]).isEmpty)
        guard recurse else {
            changes.append(FieldChange(path: path.isEmpty ? "(value)" : path, before: before, after: after))
            return
        }
        let keys = Set((beforeFields ?? [:]).keys).union((afterFields ?? [:]).keys)
        for key in keys {
            collect(beforeFields?[key], afterFields?[key], path: path.isEmpty ? key : path + "." + key, into: &changes)
        }
    }
}

/// How one command of one event differs between the base rules and the
/// new ones: made only by the new rules (`added`), only by the base ones
/// (`removed`), or by both with different fields (`changed`).
public struct CommandChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case added, removed, changed
    }

    public var kind: Kind
    public var activityID: ActivityID
    public var position: EventPosition
    /// The rule that made the base command, and the new one.
    public var baseRule: String?
    public var newRule: String?
    /// The command's fields (`alert.title`, `priority`, `event`, …) and the
    /// resulting content-state's (`content_state.…`) that differ.
    public var fields: [FieldChange]
    /// The activity as the base rules left it, with the base command folded
    /// in (the activity unchanged when the base rules made none): what the
    /// Lock Screen showed.
    public var stateBefore: ActivityState
    /// The same activity with the new command folded in instead: what the
    /// Lock Screen would show.
    public var stateAfter: ActivityState

    /// The commands one event made under each rule set, paired: by
    /// activity, in the order the rules made them; a command left without
    /// a partner is paired with nil. Equal pairs are included (they carry
    /// the activity's state from one pair to the next).
    public struct Pair: Sendable, Hashable {
        public let activityID: ActivityID
        public let base: ActivityCommand?
        public let new: ActivityCommand?
        /// Nil when both sides made the same command.
        public let kind: Kind?

        public init(activityID: ActivityID, base: ActivityCommand?, new: ActivityCommand?) {
            self.activityID = activityID
            self.base = base
            self.new = new
            kind = base == new ? nil : base == nil ? .added : new == nil ? .removed : .changed
        }

        /// Two commands already known to differ.
        init(changed base: ActivityCommand, _ new: ActivityCommand) {
            activityID = base.activityID
            self.base = base
            self.new = new
            kind = .changed
        }
    }

    public static func pairs(base: [ActivityCommand], new: [ActivityCommand]) -> [Pair] {
        // The usual event: one command on each side, for one activity.
        if base.count == 1, new.count == 1, base[0].activityID == new[0].activityID {
            return [Pair(activityID: base[0].activityID, base: base[0], new: new[0])]
        }
        var order: [ActivityID] = []
        var baseByActivity: [ActivityID: [ActivityCommand]] = [:]
        var newByActivity: [ActivityID: [ActivityCommand]] = [:]
        for command in base {
            if baseByActivity[command.activityID] == nil, newByActivity[command.activityID] == nil { order.append(command.activityID) }
            baseByActivity[command.activityID, default: []].append(command)
        }
        for command in new {
            if baseByActivity[command.activityID] == nil, newByActivity[command.activityID] == nil { order.append(command.activityID) }
            newByActivity[command.activityID, default: []].append(command)
        }
        var pairs: [Pair] = []
        for activity in order {
            let before = baseByActivity[activity] ?? []
            let after = newByActivity[activity] ?? []
            for index in 0..<max(before.count, after.count) {
                pairs.append(Pair(activityID: activity, base: index < before.count ? before[index] : nil, new: index < after.count ? after[index] : nil))
            }
        }
        return pairs
    }

    /// The changes of an event's differing pairs, field by field, with the
    /// Lock Screen states: `prior` gives the activity's state before the
    /// event (nil: none known).
    public static func changes(
        _ pairs: [Pair], position: EventPosition, now: UnixTime, prior: (ActivityID) -> ActivityState?
    ) -> [CommandChange] {
        var states: [ActivityID: ActivityState] = [:]
        var changes: [CommandChange] = []
        for pair in pairs {
            let activity = pair.activityID
            let state = states[activity] ?? prior(activity) ?? ActivityState(activityID: activity, createdAt: now)
            var stateBefore = state
            if let command = pair.base { stateBefore.fold(command, now: now) }
            states[activity] = stateBefore
            guard let kind = pair.kind else { continue }
            var stateAfter = state
            if let command = pair.new { stateAfter.fold(command, now: now) }
            var fields = FieldChange.between(pair.base.map(comparable), pair.new.map(comparable))
            fields += FieldChange.between(stateBefore.contentState, stateAfter.contentState, prefix: "content_state")
            if fields.isEmpty {
                // The patches differ but give one state: show the patches.
                fields = FieldChange.between(pair.base?.contentState, pair.new?.contentState, prefix: "content_state_patch")
            }
            changes.append(CommandChange(
                kind: kind, activityID: activity, position: position, baseRule: pair.base?.source?.rule,
                newRule: pair.new?.source?.rule, fields: fields.sorted { $0.path < $1.path },
                stateBefore: stateBefore, stateAfter: stateAfter))
        }
        return changes
    }

    /// ``changes(_:position:now:prior:)`` of two command lists.
    public static func changes(
        base: [ActivityCommand], new: [ActivityCommand], position: EventPosition, now: UnixTime,
        prior: (ActivityID) -> ActivityState?
    ) -> [CommandChange] {
        base == new ? [] : changes(pairs(base: base, new: new), position: position, now: now, prior: prior)
    }

    /// A command's JSON without what both sides share by construction
    /// (its source, its id) or what is compared as a resulting state (the
    /// content-state patch); the rule that made it is a field.
    private static func comparable(_ command: ActivityCommand) -> JSONValue {
        guard case .object(var fields) = command.json else { return command.json }
        fields["source"] = nil
        fields["id"] = nil
        fields["content_state"] = nil
        fields["activity_id"] = nil
        if let rule = command.source?.rule { fields["rule"] = .string(rule) }
        return .object(fields)
    }

    /// The change as JSON, the Lock Screen texts given by `render`.
    public func json(render: (ActivityState) -> String) -> JSONValue {
        .object([
            "kind": .string(kind.rawValue),
            "event": position.json,
            "base_rule": baseRule.map(JSONValue.string) ?? .null,
            "new_rule": newRule.map(JSONValue.string) ?? .null,
            "fields": .array(fields.map(\.json)),
            "lock_screen": .object(["before": .string(render(stateBefore)), "after": .string(render(stateAfter))]),
        ])
    }
}
