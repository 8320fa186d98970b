extension ActivityState {
    /// How far the commands a rule made from one domain partition have been
    /// applied to the activity: the newest event offset applied and the
    /// rules applied at it. It stands for every id
    /// `<topic>/<partition>@<offset>/<rule>` up to there, so an activity fed
    /// by one partition remembers its router-made ids in one entry of tens
    /// of bytes, where one digest per id made every snapshot carry the whole
    /// list (256 ids: 9 KB per snapshot, 4 KB per pending push).
    ///
    /// It relies on the order the router keeps: it reads a partition in
    /// order and writes each activity's commands to one `commands` partition
    /// with an idempotent producer, so an activity receives the commands of
    /// one domain partition in offset order, and an event routed again (a
    /// router that crashed or lost the partition before committing) comes
    /// after the ones it repeats. A command at or below the mark is a repeat.
    public struct SourceMark: Sendable, Hashable {
        public var topic: String
        public var partition: Int32
        /// The newest event offset applied.
        public var offset: Int64
        /// The rules whose commands of the event at ``offset`` were applied
        /// (`""` for a command without a rule), in the order applied.
        public var rules: [String]
        /// When the newest of them was applied, to the millisecond.
        public var appliedAt: UnixTime

        public init(topic: String, partition: Int32, offset: Int64, rules: [String], appliedAt: UnixTime) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
            self.rules = rules
            self.appliedAt = appliedAt
        }

        /// Whether the command made by `rule` from the event at `offset` is
        /// at or below this mark.
        func covers(offset: Int64, rule: String) -> Bool {
            offset < self.offset || (offset == self.offset && rules.contains(rule))
        }

        func isSource(_ source: CommandSource) -> Bool {
            source.partition == partition && source.topic == topic
        }

        var json: JSONValue {
            [
                "topic": .string(topic), "partition": .integer(Int64(partition)), "offset": .integer(offset),
                "rules": .array(rules.map(JSONValue.string)), "at": .double(appliedAt.seconds),
            ]
        }

        /// Appends ``json``'s bytes, keys in the serializer's order.
        func write(to output: inout [UInt8]) {
            var writer = JSONObjectWriter(continuing: &output)
            writer.double("at", appliedAt.seconds)
            writer.integer("offset", offset)
            writer.integer("partition", Int64(partition))
            writer.array("rules", rules) { JSONValue.writeString($0, to: &$1) }
            writer.string("topic", topic)
            output = writer.finish()
        }

        init(json: JSONValue, path: String) throws(FieldError) {
            let reader = try FieldReader(json, path: path, what: "a source mark")
            topic = try reader.requiredString("topic")
            (partition, offset) = try reader.kafkaPosition()
            rules = []
            for (index, rule) in try reader.array("rules").enumerated() {
                guard let name = rule.stringValue else {
                    throw FieldError(field: reader.name("rules[\(index)]"), message: "expected a rule name, got \(rule.typeName)")
                }
                rules.append(name)
            }
            guard let appliedAt = try reader.date("at") else { throw FieldError(field: reader.name("at"), message: "is required") }
            self.appliedAt = appliedAt
        }
    }

    /// Whether `command` repeats one applied at or after `since`: a
    /// router-made command (its id is its source's) at or below its
    /// partition's mark, or any other command whose id is remembered.
    public func remembers(_ command: ActivityCommand, since: UnixTime) -> Bool {
        guard let commandID = command.id else { return false }
        guard let source = command.markedSource else { return remembers(commandID, since: since) }
        return sourceMarks.contains { $0.isSource(source) && $0.appliedAt >= since && $0.covers(offset: source.offset, rule: source.rule ?? "") }
    }

    /// Remembers `command` as applied at `now` (nothing when it has no
    /// id), forgetting what was applied before `since` and the oldest
    /// beyond `limit` (marks and ids counted apart; a mark's rules too).
    /// A limit of 0 forgets everything remembered.
    public mutating func remember(_ command: ActivityCommand, at now: UnixTime, since: UnixTime, limit: Int) {
        guard limit > 0 else {
            // Remembering is off: what an earlier snapshot carried goes.
            commandIDs.removeAll()
            sourceMarks.removeAll()
            return
        }
        guard let commandID = command.id else { return }
        guard let source = command.markedSource else {
            remember(commandID, at: now, since: since, limit: limit)
            return
        }
        // Checked first: the list is shared with the last flush's snapshot,
        // and removing (even nothing) would copy it.
        if sourceMarks.contains(where: { $0.appliedAt < since }) { sourceMarks.removeAll { $0.appliedAt < since } }
        let rule = source.rule ?? ""
        let at = Self.millisecond(now)
        // The newest applied last: past the limit the least recently fed partitions go.
        guard var index = sourceMarks.firstIndex(where: { $0.isSource(source) }) else {
            sourceMarks.append(SourceMark(topic: source.topic, partition: source.partition, offset: source.offset, rules: [rule], appliedAt: at))
            if sourceMarks.count > limit { sourceMarks.removeFirst(sourceMarks.count - limit) }
            return
        }
        if index != sourceMarks.count - 1 {
            sourceMarks.append(sourceMarks.remove(at: index))
            index = sourceMarks.count - 1
        }
        if source.offset > sourceMarks[index].offset {
            sourceMarks[index].offset = source.offset
            sourceMarks[index].rules.removeAll(keepingCapacity: true)
            sourceMarks[index].rules.append(rule)
        } else if !sourceMarks[index].rules.contains(rule) {
            sourceMarks[index].rules.append(rule)
            if sourceMarks[index].rules.count > limit { sourceMarks[index].rules.removeFirst(sourceMarks[index].rules.count - limit) }
        }
        sourceMarks[index].appliedAt = at
    }

    /// A time rounded to the millisecond: remembered times are written digit
    /// by digit (``JSONValue/writeDescription(_:to:)``).
    static func millisecond(_ time: UnixTime) -> UnixTime {
        UnixTime(seconds: (time.seconds * 1000).rounded() / 1000)
    }
}

extension ActivityCommand {
    /// The command's source when its id is the one the router derives from
    /// it (``CommandSource/commandID``): such a command is remembered by its
    /// partition's ``ActivityState/SourceMark``. Nil for a command without a
    /// source or with an id of its own.
    var markedSource: CommandSource? {
        guard let source, let id, source.derives(id) else { return nil }
        return source
    }
}

extension CommandSource {
    /// Whether `id` is ``commandID``, compared piece by piece instead of
    /// building it (this runs for every command received).
    func derives(_ id: String) -> Bool {
        var id = id
        var topic = topic
        var rule = self.rule ?? ""
        // The longest `<partition>@<offset>` is 10 + 1 + 19 digits.
        guard topic.utf8.count + rule.utf8.count + 33 <= ActivityCommand.maxIDBytes else { return id == commandID }
        return id.withUTF8 { id in
            topic.withUTF8 { topic in
                rule.withUTF8 { rule in
                    var index = 0
                    func expect(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
                        guard id.count - index >= bytes.count, bytesMatch(id, from: index, bytes) else { return false }
                        index += bytes.count
                        return true
                    }
                    func expect(_ byte: UInt8) -> Bool {
                        guard index < id.count, id[index] == byte else { return false }
                        index += 1
                        return true
                    }
                    // A number as `description` writes it: no sign for 0 or
                    // more, no leading zero; 19 digits fit a UInt64, and a
                    // 20th is not the `@` or `/` expected after it.
                    func expect(_ number: Int64) -> Bool {
                        guard number >= 0 else { return false }
                        let start = index
                        var value: UInt64 = 0
                        while index < id.count, index - start < 19, id[index] >= UInt8(ascii: "0"), id[index] <= UInt8(ascii: "9") {
                            if index - start == 1 && value == 0 { return false }
                            value = value * 10 + UInt64(id[index] - UInt8(ascii: "0"))
                            index += 1
                        }
                        return index > start && value == UInt64(bitPattern: number)
                    }
                    return expect(topic) && expect(UInt8(ascii: "/")) && expect(Int64(partition)) && expect(UInt8(ascii: "@"))
                        && expect(offset) && expect(UInt8(ascii: "/")) && expect(rule) && index == id.count
                }
            }
        }
    }
}

/// Whether `id` holds `bytes` from `offset` on (the caller checked the length).
private func bytesMatch(_ id: UnsafeBufferPointer<UInt8>, from offset: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for position in 0..<bytes.count where id[offset + position] != bytes[position] { return false }
    return true
}
