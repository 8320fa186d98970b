@testable import LiveDispatchCore
import Testing

@Suite("Command idempotency")
struct IdempotencyTests {
    let t0 = 1_764_000_000.0

    func command(_ id: String?, _ patch: JSONValue, event: ActivityEvent = .update) -> ActivityCommand {
        var command = update("match-42", patch, event: event)
        command.id = id
        return command
    }

    @Test("a repeated command id is acknowledged and not applied; another id is")
    func repeatIsDuplicate() throws {
        var coalescer = Coalescer(configuration: .init(window: 0))
        _ = coalescer.receive(command("goal-1", ["score": 1]), offset: 0, recordTime: time(t0), now: time(t0))
        let repeated = coalescer.receive(command("goal-1", ["score": 99]), offset: 1, recordTime: time(t0 + 1), now: time(t0 + 1))
        #expect(repeated == .duplicate(commandID: "goal-1"))
        #expect(coalescer.state(of: try ActivityID("match-42"))?.contentState == ["score": 1])
        let other = coalescer.receive(command("goal-2", ["score": 2]), offset: 2, recordTime: time(t0 + 2), now: time(t0 + 2))
        #expect(other.flushed?.push.contentState == ["score": 2])
        #expect(other.flushed?.snapshot.commandIDs.map(\.digest) == ["goal-1", "goal-2"].map(ActivityState.RememberedCommand.digest))
    }

    @Test("commands without an id are never duplicates")
    func noID() {
        var coalescer = Coalescer(configuration: .init(window: 0))
        _ = coalescer.receive(command(nil, ["score": 1]), offset: 0, recordTime: time(t0), now: time(t0))
        let again = coalescer.receive(command(nil, ["score": 1]), offset: 1, recordTime: time(t0), now: time(t0 + 1))
        #expect(again.flushed?.push.version == 2)
    }

    @Test("after the window an id applies again")
    func windowPasses() {
        var coalescer = Coalescer(configuration: .init(window: 0, maxAge: 100 * 3600, idempotencyWindow: 3600))
        _ = coalescer.receive(command("goal-1", ["score": 1]), offset: 0, recordTime: time(t0), now: time(t0))
        #expect(coalescer.receive(command("goal-1", ["score": 2]), offset: 1, recordTime: time(t0), now: time(t0 + 3599)) == .duplicate(commandID: "goal-1"))
        let later = coalescer.receive(command("goal-1", ["score": 3]), offset: 2, recordTime: time(t0), now: time(t0 + 3601))
        #expect(later.flushed?.push.contentState == ["score": 3])
    }

    @Test("only the newest ids are remembered, and a repeat of an ended activity's end is a duplicate, not activity-ended")
    func boundedAndEnded() {
        var coalescer = Coalescer(configuration: .init(window: 0, maxRememberedIDs: 3))
        for n in 0..<5 {
            _ = coalescer.receive(command("u-\(n)", ["n": .integer(Int64(n))]), offset: Int64(n), recordTime: time(t0), now: time(t0 + Double(n)))
        }
        let ended = coalescer.receive(command("end-1", [:], event: .end), offset: 5, recordTime: time(t0), now: time(t0 + 5))
        #expect(ended.flushed?.snapshot.commandIDs.map(\.digest) == ["u-3", "u-4", "end-1"].map(ActivityState.RememberedCommand.digest))
        #expect(coalescer.receive(command("end-1", [:], event: .end), offset: 6, recordTime: time(t0), now: time(t0 + 6)) == .duplicate(commandID: "end-1"))
        // "u-0" was forgotten: against an ended activity it is refused as usual.
        if case .reject(let reason, _, _) = coalescer.receive(command("u-0", ["n": 0]), offset: 7, recordTime: time(t0), now: time(t0 + 7)) {
            #expect(reason == .activityEnded)
        } else {
            Issue.record("a forgotten id is applied like any command")
        }
    }

    @Test("remembered ids survive the state snapshot, so a new owner of the partition knows them")
    func snapshotRoundTrip() throws {
        var coalescer = Coalescer(configuration: .init(window: 0))
        let flush = try #require(coalescer.receive(command("goal-1", ["score": 1]), offset: 0, recordTime: time(t0), now: time(t0)).flushed)
        let restoredState = try ActivityState(json: flush.snapshot.json)
        #expect(restoredState == flush.snapshot)
        var next = Coalescer(configuration: .init(window: 0))
        next.restore(restoredState)
        #expect(next.receive(command("goal-1", ["score": 5]), offset: 1, recordTime: time(t0), now: time(t0 + 60)) == .duplicate(commandID: "goal-1"))
    }

    @Test("hostile ids and remembered entries are refused with the field named")
    func hostile() throws {
        #expect(throws: FieldError.self) { try ActivityCommand(json: ["activity_id": "a", "id": ""]) }
        #expect(throws: FieldError.self) { try ActivityCommand(json: ["activity_id": "a", "id": .string(String(repeating: "x", count: 201))]) }
        #expect((try? ActivityCommand(json: ["activity_id": "a", "id": .string(String(repeating: "x", count: 200))]))?.id?.count == 200)
        do {
            _ = try ActivityState(json: ["activity_id": "a", "version": 1, "created_at": 1, "command_ids": [["id": "x"]]])
            Issue.record("a remembered id without a time is refused")
        } catch {
            #expect(error.field == "command_ids[0].at")
        }
        for bad: JSONValue in ["x", "0123456789abcdef", "0123456789abcdeg@1", "123@1", "0123456789abcdef@1e300", 7] {
            do {
                _ = try ActivityState(json: ["activity_id": "a", "version": 1, "created_at": 1, "command_digests": [bad]])
                Issue.record("the remembered digest \(bad) is refused")
            } catch {
                #expect(error.field == "command_digests[0]")
            }
        }
    }

    @Test("a snapshot of an earlier release, with whole ids, restores: its ids are still known; it is written back as digests")
    func earlierSnapshot() throws {
        let earlier = try ActivityState(json: [
            "activity_id": "a", "version": 1, "created_at": .double(t0), "content_state": ["score": 1],
            "command_ids": [["id": "goal-1", "at": .double(t0)]],
        ])
        #expect(earlier.remembers("goal-1", since: time(t0 - 1)))
        #expect(!earlier.remembers("goal-2", since: time(t0 - 1)))
        let written = earlier.json
        #expect(written["command_ids"] == nil)
        #expect(written["command_digests"]?.arrayValue?.count == 1)
        #expect(try ActivityState(json: written) == earlier)
    }
}

@Suite("Command ids of routed events")
struct RoutedCommandIDTests {
    @Test("the same event and rule make the same id, any other event or rule another; long names are hashed within the limit")
    func derived() throws {
        let source = try CommandSource(json: ["topic": "sports.scores", "partition": 3, "offset": 1234, "rule": "goal"], path: "source")
        #expect(source.commandID == "sports.scores/3@1234/goal")
        let again = try CommandSource(json: ["topic": "sports.scores", "partition": 3, "offset": 1234, "rule": "goal"], path: "source")
        #expect(again.commandID == source.commandID)
        let other = try CommandSource(json: ["topic": "sports.scores", "partition": 3, "offset": 1235, "rule": "goal"], path: "source")
        #expect(other.commandID != source.commandID)
        let long = try CommandSource(json: ["topic": .string(String(repeating: "t", count: 249)), "partition": 0, "offset": 7, "rule": "r"], path: "source")
        let longOther = try CommandSource(json: ["topic": .string(String(repeating: "t", count: 249)), "partition": 0, "offset": 7, "rule": "s"], path: "source")
        #expect(long.commandID.utf8.count <= ActivityCommand.maxIDBytes && long.commandID != longOther.commandID)
        var command = ActivityCommand(activityID: try ActivityID("a"))
        command.id = long.commandID
        #expect((try? ActivityCommand(json: command.json))?.id == long.commandID, "a derived id always decodes")
        // As the router writes them: a command without an id takes its source's; one with an id keeps it.
        var made = ActivityCommand(activityID: try ActivityID("a"), source: source)
        #expect(made.routed.id == "sports.scores/3@1234/goal")
        made.id = "backend-7"
        #expect(made.routed.id == "backend-7")
        #expect(ActivityCommand(activityID: try ActivityID("a")).routed.id == nil)
    }

    @Test("whether an id is its source's is decided without building it, exactly as comparing with the built one")
    func derives() {
        var generator = SystemRandomNumberGenerator()
        let topics = ["sports", "a/b@c", "", "é", String(repeating: "t", count: 170)]
        let rules: [String?] = [nil, "", "goal", "x/y@1", String(repeating: "r", count: 40)]
        let numbers: [Int64] = [0, 1, 9, 10, 1234, Int64(Int32.max), .max]
        for _ in 0..<3_000 {
            let source = CommandSource(
                topic: topics.randomElement(using: &generator) ?? "", partition: Int32(clamping: numbers.randomElement(using: &generator) ?? 0),
                offset: numbers.randomElement(using: &generator) ?? 0, rule: rules.randomElement(using: &generator) ?? nil)
            var candidates = [source.commandID, source.commandID + "x", String(source.commandID.dropLast())]
            let rule = source.rule ?? ""
            candidates.append("\(source.topic)/0\(source.partition)@\(source.offset)/\(rule)")
            candidates.append("\(source.topic)/\(source.partition)@0\(source.offset)/\(rule)")
            candidates.append("\(source.topic)/-\(source.partition)@\(source.offset)/\(rule)")
            candidates.append("\(source.topic)/\(source.partition)@\(source.offset)0/\(rule)")
            candidates.append("\(source.topic)/\(source.partition)@\(source.offset)/\(rule.uppercased())")
            candidates.append("\(source.topic)/\(source.partition)@99999999999999999999/\(rule)")
            for id in candidates {
                #expect(source.derives(id) == (id == source.commandID), "\(source) \(id)")
            }
        }
    }

    @Test("ids are remembered to the millisecond, and their times are written exactly as their description, kept to the millisecond or not")
    func rememberedTimes() throws {
        let t0 = 1_764_000_000.0
        var state = ActivityState(activityID: try ActivityID("a"), createdAt: time(t0))
        state.remember("goal-1", at: time(t0 + 0.1234567), since: time(t0 - 1), limit: 8)
        #expect(state.commandIDs.last?.appliedAt == time(t0 + 0.123))
        #expect(state.remembers("goal-1", since: time(t0)))
        var generator = SystemRandomNumberGenerator()
        var times: [Double] = [0, 0.001, 0.5, 1, 10.05, 1_764_000_000, 1_764_000_000.1, 1_764_000_000.12, 1_764_000_000.999, 253_402_300_799.999,
                               1_764_000_000.0001, 1_764_000_000.123456, 0.1234567]
        for _ in 0..<2_000 {
            let milliseconds = Double(Int64.random(in: 0...253_402_300_799_999, using: &generator))
            times.append(milliseconds / 1000)
            times.append(Double.random(in: 0...253_402_300_799, using: &generator))
        }
        for seconds in times {
            var bytes: [UInt8] = []
            JSONValue.writeDescription(seconds, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == seconds.description, "\(seconds)")
            let remembered = ActivityState.RememberedCommand(digest: 42, appliedAt: UnixTime(seconds: seconds))
            var written: [UInt8] = []
            remembered.write(to: &written)
            #expect(String(decoding: written, as: UTF8.self) == "\"" + remembered.text + "\"")
        }
    }
}

@Suite("Source marks: router-made command ids")
struct SourceMarkTests {
    let t0 = 1_764_000_000.0

    /// The command a rule made of the event at `offset` of `sports[partition]`, as the router writes it.
    func routed(_ offset: Int64, rule: String? = "goal", partition: Int32 = 3, _ patch: JSONValue = ["n": 1], activity: String = "match-42") -> ActivityCommand {
        var command = update(activity, patch)
        command.source = CommandSource(topic: "sports", partition: partition, offset: offset, rule: rule)
        return command.routed
    }

    func coalescer(limit: Int = 256, window: Double = 24 * 3600) -> Coalescer {
        Coalescer(configuration: .init(window: 0, maxAge: 100 * 3600, idempotencyWindow: window, maxRememberedIDs: limit))
    }

    @Test("an event routed again is a duplicate, and so is any older event of its partition; the next event and another rule of the same event apply")
    func replays() throws {
        var coalescer = coalescer()
        var offset: Int64 = 0
        func receive(_ command: ActivityCommand) -> Coalescer.ReceiveAction {
            offset += 1
            return coalescer.receive(command, offset: offset, recordTime: time(t0), now: time(t0 + Double(offset)))
        }
        #expect(receive(routed(100, ["n": 100])).flushed != nil)
        #expect(receive(routed(105, ["n": 105])).flushed != nil)
        #expect(receive(routed(105, rule: "card", ["c": 1])).flushed != nil, "another rule of the same event")
        #expect(receive(routed(105, rule: nil, ["d": 1])).flushed != nil, "a command without a rule")
        #expect(receive(routed(105, ["n": 0])) == .duplicate(commandID: "sports/3@105/goal"))
        #expect(receive(routed(105, rule: "card", ["c": 0])) == .duplicate(commandID: "sports/3@105/card"))
        #expect(receive(routed(105, rule: nil, ["d": 0])) == .duplicate(commandID: "sports/3@105/"))
        #expect(receive(routed(100, ["n": 0])) == .duplicate(commandID: "sports/3@100/goal"))
        #expect(receive(routed(101, rule: "other", ["n": 0])) == .duplicate(commandID: "sports/3@101/other"), "below the mark, whatever the rule")
        #expect(receive(routed(7, partition: 4, ["p": 4])).flushed != nil, "another partition has its own mark")
        #expect(receive(routed(106, ["n": 106])).flushed != nil)
        let state = try #require(coalescer.state(of: try ActivityID("match-42")))
        #expect(state.contentState == ["n": 106, "c": 1, "d": 1, "p": 4])
        #expect(state.commandIDs.isEmpty, "router-made ids take no digest")
        #expect(state.sourceMarks.map(\.partition) == [4, 3], "least recently fed first")
        #expect(state.sourceMarks.last?.offset == 106 && state.sourceMarks.last?.rules == ["goal"])
    }

    @Test("a command whose id is its own, or that has no source, is remembered by digest, beside the marks")
    func ownIDs() throws {
        var coalescer = coalescer()
        var own = routed(200)
        own.id = "backend-7"
        #expect(coalescer.receive(own, offset: 0, recordTime: time(t0), now: time(t0)).flushed != nil)
        #expect(coalescer.receive(routed(150), offset: 1, recordTime: time(t0), now: time(t0 + 1)).flushed != nil,
                "an own id sets no mark: an older event of the partition still applies")
        own.source?.offset = 300
        #expect(coalescer.receive(own, offset: 2, recordTime: time(t0), now: time(t0 + 2)) == .duplicate(commandID: "backend-7"))
        var direct = update("match-42", ["x": 1])
        direct.id = "sports/3@150/goal"
        #expect(coalescer.receive(direct, offset: 3, recordTime: time(t0), now: time(t0 + 3)).flushed != nil,
                "the same text without its source is an id of its own")
        let state = try #require(coalescer.state(of: try ActivityID("match-42")))
        #expect(state.commandIDs.map(\.digest) == ["backend-7", "sports/3@150/goal"].map(ActivityState.RememberedCommand.digest))
        #expect(state.sourceMarks.count == 1)
    }

    @Test("a mark is forgotten after the idempotency window; marks and a mark's rules are bounded by the id limit; 0 remembers none")
    func bounds() throws {
        var windowed = coalescer(window: 3600)
        _ = windowed.receive(routed(100), offset: 0, recordTime: time(t0), now: time(t0))
        #expect(windowed.receive(routed(90), offset: 1, recordTime: time(t0), now: time(t0 + 3599)) == .duplicate(commandID: "sports/3@90/goal"))
        #expect(windowed.receive(routed(90), offset: 2, recordTime: time(t0), now: time(t0 + 3601)).flushed != nil)

        var bounded = coalescer(limit: 2)
        for partition: Int32 in 0..<3 { _ = bounded.receive(routed(10, partition: partition), offset: Int64(partition), recordTime: time(t0), now: time(t0)) }
        for (index, rule) in ["a", "b", "c"].enumerated() {
            _ = bounded.receive(routed(10, rule: rule, partition: 2), offset: Int64(10 + index), recordTime: time(t0), now: time(t0))
        }
        let state = try #require(bounded.state(of: try ActivityID("match-42")))
        #expect(state.sourceMarks.map(\.partition) == [1, 2])
        #expect(state.sourceMarks.last?.rules == ["b", "c"])
        #expect(bounded.receive(routed(5, partition: 0), offset: 20, recordTime: time(t0), now: time(t0)).flushed != nil, "partition 0's mark was dropped")

        var none = coalescer(limit: 0)
        _ = none.receive(routed(100), offset: 0, recordTime: time(t0), now: time(t0))
        #expect(none.receive(routed(100), offset: 1, recordTime: time(t0), now: time(t0)).flushed != nil)
        #expect(none.state(of: try ActivityID("match-42"))?.sourceMarks.isEmpty == true)

        // Turned off after a snapshot remembered marks and ids: they count no
        // more, and the next snapshot carries none.
        var remembering = coalescer()
        var own = routed(300)
        own.id = "backend-7"
        _ = remembering.receive(routed(200), offset: 0, recordTime: time(t0), now: time(t0))
        _ = remembering.receive(own, offset: 1, recordTime: time(t0), now: time(t0))
        let snapshot = try #require(remembering.state(of: try ActivityID("match-42")))
        #expect(snapshot.sourceMarks.count == 1 && snapshot.commandIDs.count == 1)
        var off = coalescer(limit: 0)
        off.restore(snapshot)
        #expect(off.receive(own, offset: 2, recordTime: time(t0), now: time(t0 + 1)).flushed != nil)
        let replayed = try #require(off.receive(routed(200), offset: 3, recordTime: time(t0), now: time(t0 + 1)).flushed)
        #expect(replayed.snapshot.sourceMarks.isEmpty && replayed.snapshot.commandIDs.isEmpty)
    }

    @Test("marks survive the state snapshot, so a new owner of the partition drops the events its predecessor applied")
    func snapshotRoundTrip() throws {
        var coalescer = coalescer()
        _ = coalescer.receive(routed(100), offset: 0, recordTime: time(t0), now: time(t0 + 0.1234))
        let flush = try #require(coalescer.receive(routed(100, rule: "card"), offset: 1, recordTime: time(t0), now: time(t0 + 1)).flushed)
        let written = flush.snapshot.json
        #expect(written["source_marks"] == [["topic": "sports", "partition": 3, "offset": 100, "rules": ["goal", "card"], "at": .double(t0 + 1)]])
        let restored = try ActivityState(json: written)
        #expect(restored == flush.snapshot)
        var next = self.coalescer()
        next.restore(restored)
        #expect(next.receive(routed(100, rule: "card"), offset: 2, recordTime: time(t0), now: time(t0 + 60)) == .duplicate(commandID: "sports/3@100/card"))
        #expect(next.receive(routed(99), offset: 3, recordTime: time(t0), now: time(t0 + 60)) == .duplicate(commandID: "sports/3@99/goal"))
        #expect(next.receive(routed(101), offset: 4, recordTime: time(t0), now: time(t0 + 60)).flushed != nil)
    }

    @Test("hostile marks in a snapshot are refused with the field named")
    func hostile() {
        let good: [String: JSONValue] = ["topic": "sports", "partition": 3, "offset": 1, "rules": ["goal"], "at": 1]
        let cases: [(String, JSONValue?, String)] = [
            ("topic", nil, "source_marks[0].topic"), ("topic", 7, "source_marks[0].topic"),
            ("partition", -1, "source_marks[0].partition"), ("partition", 4_294_967_296, "source_marks[0].partition"),
            ("offset", -5, "source_marks[0].offset"), ("offset", "1", "source_marks[0].offset"),
            ("rules", [1], "source_marks[0].rules[0]"), ("rules", "goal", "source_marks[0].rules"),
            ("at", nil, "source_marks[0].at"), ("at", 1e300, "source_marks[0].at"),
        ]
        for (key, value, field) in cases {
            var mark = good
            mark[key] = value
            do {
                _ = try ActivityState(json: ["activity_id": "a", "version": 1, "created_at": 1, "source_marks": [.object(mark)]])
                Issue.record("\(key): \(value.map { "\($0)" } ?? "missing") is refused")
            } catch {
                #expect(error.field == field, "\(key)")
            }
        }
        #expect(throws: FieldError.self) { try ActivityState(json: ["activity_id": "a", "version": 1, "created_at": 1, "source_marks": ["x"]]) }
    }
}
