import LiveDispatchCore

/// What two rule sets do differently on a stream of events: the machine
/// behind `livedispatch rules diff`. Feed it each event's outcomes under
/// the base rules and the new ones (``add(_:base:new:)``), in the order the
/// events were read; ask for the ``report(limit:)`` at the end.
///
/// Memory stays bounded whatever the number of events: it keeps counts,
/// at most ``Limits/examplesPerActivity`` changes per activity, a table of
/// at most ``Limits/activities`` activities (when full, the less affected
/// half is dropped), at most ``Limits/trackedStates`` activity states (for
/// the Lock Screen texts; an activity beyond starts from an empty state)
/// and at most ``Limits/distinctActivities`` activity digests (beyond, the
/// count of activities affected is a lower bound).
public struct RuleDiff: Sendable {
    public struct Limits: Sendable, Hashable {
        public var activities = 2_000
        public var examplesPerActivity = 3
        public var examplesPerRule = 5
        public var trackedStates = 50_000
        public var distinctActivities = 1_000_000

        public init() {}
    }

    /// The counts of a diff.
    public struct Summary: Sendable, Hashable {
        public var eventsRead = 0
        /// Events whose commands or errors differ.
        public var eventsDiffering = 0
        public var activitiesAffected = 0
        /// False once more activities were affected than could be counted one by one.
        public var activitiesAffectedIsExact = true
        public var commandsAdded = 0
        public var commandsRemoved = 0
        public var commandsChanged = 0
        /// Failures of the new rules on events where the base rules had none from that rule.
        public var newErrors = 0
        /// Failures of the base rules that the new rules no longer have.
        public var fixedErrors = 0
        /// Events neither rule set can read (not JSON, not an object, too large).
        public var unreadableEvents = 0
    }

    /// The changes to one activity.
    public struct ActivityChanges: Sendable, Hashable {
        public var activityID: ActivityID
        /// Events that changed this activity's commands.
        public var events = 0
        public var added = 0
        public var removed = 0
        public var changed = 0
        /// The first changes, at most ``Limits/examplesPerActivity``.
        public var examples: [CommandChange] = []
    }

    /// Failures of one rule (nil: the event itself) on some events.
    public struct Failures: Sendable, Hashable {
        public var rule: String?
        public var count = 0
        /// The first failures, at most ``Limits/examplesPerRule``.
        public var examples: [Example] = []

        /// Where one failure happened, and why.
        public struct Example: Sendable, Hashable {
            public var position: EventPosition
            public var reason: String
        }
    }

    /// What the diff found, most affected activities first.
    public struct Report: Sendable, Hashable {
        public var summary: Summary
        public var activities: [ActivityChanges]
        /// New errors by rule, most frequent first.
        public var newErrors: [Failures]
        /// Events neither rule set can read, with examples.
        public var unreadable: Failures
    }

    public let limits: Limits
    public private(set) var summary = Summary()
    private var activities: [ActivityID: ActivityChanges] = [:]
    private var states: [ActivityID: ActivityState] = [:]
    private var affected: Set<UInt64> = []
    private var newErrors: [String?: Failures] = [:]
    private var unreadable = Failures(rule: nil)

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Takes one event's outcomes under the base rules and the new ones.
    /// `now` is the time the commands are applied at (the record's time).
    public mutating func add(_ record: EventRecord, base: [RuleOutcome], new: [RuleOutcome], now: UnixTime) {
        summary.eventsRead += 1
        defer { track(base, now: now) }
        if base == new {
            if case .failure(let failure)? = base.first, failure.code == .invalidEvent {
                summary.unreadableEvents += 1
                Self.note(failure, at: record, in: &unreadable, limit: limits.examplesPerRule)
            }
            return
        }
        var differs = false
        let baseFailures = Self.failures(base)
        let newFailures = Self.failures(new)
        if baseFailures != newFailures {
            differs = true
            for failure in newFailures where !baseFailures.contains(where: { $0.rule == failure.rule && $0.code == failure.code }) {
                summary.newErrors += 1
                Self.note(failure, at: record, in: &newErrors[failure.rule, default: Failures(rule: failure.rule)], limit: limits.examplesPerRule)
            }
            summary.fixedErrors += baseFailures.count { failure in
                !newFailures.contains { $0.rule == failure.rule && $0.code == failure.code }
            }
        }
        let pairs: [CommandChange.Pair]
        if base.count == 1, new.count == 1, case .command(let before) = base[0], case .command(let after) = new[0],
           before.activityID == after.activityID {
            // The usual differing event: the outcomes differ, so the commands do.
            pairs = [CommandChange.Pair(changed: before, after)]
        } else {
            pairs = CommandChange.pairs(base: Self.commands(base), new: Self.commands(new))
        }
        let differing = pairs.filter { $0.kind != nil }
        if differing.isEmpty {
            if differs { summary.eventsDiffering += 1 }
            return
        }
        summary.eventsDiffering += 1
        // Field diffs and states are worked out only for an activity that
        // still wants examples: most differing events only count.
        let wanted = differing.contains { pair in
            activities[pair.activityID].map { $0.examples.count < limits.examplesPerActivity } ?? true
        }
        let changes = wanted
            ? CommandChange.changes(pairs, position: EventPosition(record), now: now, prior: { states[$0] })
            : []
        var counted: Set<ActivityID> = []
        for (index, pair) in differing.enumerated() {
            guard let kind = pair.kind else { continue }
            switch kind {
            case .added: summary.commandsAdded += 1
            case .removed: summary.commandsRemoved += 1
            case .changed: summary.commandsChanged += 1
            }
            let first = counted.insert(pair.activityID).inserted
            if first { countAffected(pair.activityID) }
            tally(pair.activityID, kind, example: index < changes.count ? changes[index] : nil, newEvent: first)
        }
    }

    /// The most affected activities first (by events, then commands, then
    /// id), at most `limit`.
    public func report(limit: Int) -> Report {
        let ranked = activities.values.sorted { lhs, rhs in
            let left = (lhs.events, lhs.added + lhs.removed + lhs.changed)
            let right = (rhs.events, rhs.added + rhs.removed + rhs.changed)
            return left != right ? left > right : lhs.activityID < rhs.activityID
        }
        let errors = newErrors.values.sorted { lhs, rhs in
            lhs.count != rhs.count ? lhs.count > rhs.count : (lhs.rule ?? "") < (rhs.rule ?? "")
        }
        return Report(summary: summary, activities: Array(ranked.prefix(max(0, limit))), newErrors: errors, unreadable: unreadable)
    }

    private mutating func tally(_ activity: ActivityID, _ kind: CommandChange.Kind, example: CommandChange?, newEvent: Bool) {
        if activities[activity] == nil, activities.count >= limits.activities { prune() }
        var entry = activities.removeValue(forKey: activity) ?? ActivityChanges(activityID: activity)
        if newEvent { entry.events += 1 }
        switch kind {
        case .added: entry.added += 1
        case .removed: entry.removed += 1
        case .changed: entry.changed += 1
        }
        if let example, entry.examples.count < limits.examplesPerActivity { entry.examples.append(example) }
        activities[activity] = entry
    }

    /// Drops the less affected half of the activity table.
    private mutating func prune() {
        let kept = activities.values.sorted { lhs, rhs in
            lhs.events != rhs.events ? lhs.events > rhs.events : lhs.activityID < rhs.activityID
        }.prefix(max(1, limits.activities / 2))
        activities = Dictionary(uniqueKeysWithValues: kept.map { ($0.activityID, $0) })
    }

    private mutating func countAffected(_ activity: ActivityID) {
        let digest = FNV1a.hash(activity.rawValue)
        if affected.contains(digest) { return }
        guard affected.count < limits.distinctActivities else {
            summary.activitiesAffectedIsExact = false
            return
        }
        affected.insert(digest)
        summary.activitiesAffected += 1
    }

    /// Folds the base rules' commands into the activities' states.
    private mutating func track(_ outcomes: [RuleOutcome], now: UnixTime) {
        for case .command(let command) in outcomes {
            if let index = states.index(forKey: command.activityID) {
                states.values[index].fold(command, now: now)
            } else if states.count < limits.trackedStates {
                var state = ActivityState(activityID: command.activityID, createdAt: now)
                state.fold(command, now: now)
                states[command.activityID] = state
            }
        }
    }

    private static func note(_ failure: RuleFailure, at record: EventRecord, in failures: inout Failures, limit: Int) {
        failures.count += 1
        if failures.examples.count < limit { failures.examples.append(Failures.Example(position: EventPosition(record), reason: failure.reason)) }
    }

    private static func commands(_ outcomes: [RuleOutcome]) -> [ActivityCommand] {
        outcomes.compactMap { if case .command(let command) = $0 { command } else { nil } }
    }

    private static func failures(_ outcomes: [RuleOutcome]) -> [RuleFailure] {
        outcomes.compactMap { if case .failure(let failure) = $0 { failure } else { nil } }
    }
}

extension RuleDiff {
    /// Evaluates both rule sets on one record's value as the router
    /// evaluates one: a topic neither reads is no match; the value is
    /// parsed once (within `eventLimits`) for both. `rejection` is a
    /// failure found before evaluation (the event is too large): every rule
    /// set reading the topic fails with it.
    public static func evaluate(
        base: RuleSet, new: RuleSet, record: EventRecord, value: [UInt8], now: UnixTime,
        eventLimits: JSONParseLimits = RuleSet.eventLimits, rejection: RuleFailure? = nil
    ) -> (base: [RuleOutcome], new: [RuleOutcome]) {
        let baseReads = base.rulesByTopic[record.topic] != nil
        let newReads = new.rulesByTopic[record.topic] != nil
        guard baseReads || newReads else { return ([.noMatch], [.noMatch]) }
        func failed(_ failure: RuleFailure) -> (base: [RuleOutcome], new: [RuleOutcome]) {
            (baseReads ? [.failure(failure)] : [.noMatch], newReads ? [.failure(failure)] : [.noMatch])
        }
        if let rejection { return failed(rejection) }
        let event: JSONValue
        do {
            event = try RuleSet.parseEvent(value, limits: eventLimits)
        } catch {
            return failed(error)
        }
        return (base.evaluate(record, event: event, now: now), new.evaluate(record, event: event, now: now))
    }
}

extension RuleDiff.Report {
    /// The report's JSON (the shape `rules diff --json` prints and
    /// docs/rules.md describes), the Lock Screen texts given by `render`.
    public func json(render: (ActivityState) -> String) -> JSONValue {
        func failures(_ failures: RuleDiff.Failures) -> JSONValue {
            .object([
                "rule": failures.rule.map(JSONValue.string) ?? .null,
                "count": .integer(Int64(failures.count)),
                "examples": .array(failures.examples.map { example in
                    .object(["event": example.position.json, "reason": .string(example.reason)])
                }),
            ])
        }
        return .object([
            "summary": .object([
                "events_read": .integer(Int64(summary.eventsRead)),
                "events_differing": .integer(Int64(summary.eventsDiffering)),
                "activities_affected": .integer(Int64(summary.activitiesAffected)),
                "activities_affected_exact": .bool(summary.activitiesAffectedIsExact),
                "commands_added": .integer(Int64(summary.commandsAdded)),
                "commands_removed": .integer(Int64(summary.commandsRemoved)),
                "commands_changed": .integer(Int64(summary.commandsChanged)),
                "new_errors": .integer(Int64(summary.newErrors)),
                "fixed_errors": .integer(Int64(summary.fixedErrors)),
                "unreadable_events": .integer(Int64(summary.unreadableEvents)),
            ]),
            "new_errors": .array(newErrors.map(failures)),
            "unreadable": failures(unreadable),
            "activities": .array(activities.map { activity in
                .object([
                    "activity_id": .string(activity.activityID.rawValue),
                    "events": .integer(Int64(activity.events)),
                    "added": .integer(Int64(activity.added)),
                    "removed": .integer(Int64(activity.removed)),
                    "changed": .integer(Int64(activity.changed)),
                    "examples": .array(activity.examples.map { $0.json(render: render) }),
                ])
            }),
        ])
    }
}
