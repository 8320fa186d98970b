import LiveDispatchCore
import Testing

/// Builds commands tersely for the coalescer and fan-out tests.
func update(
    _ activity: String, _ patch: JSONValue, at timestamp: Double? = nil, priority: PushPriority? = nil,
    alert: ActivityAlert? = nil, stale: Double? = nil, dismissal: Double? = nil, replace: Bool = false,
    event: ActivityEvent = .update
) -> ActivityCommand {
    ActivityCommand(
        activityID: try! ActivityID(activity), event: event, contentState: patch, replaceState: replace,
        timestamp: timestamp.map(UnixTime.init(seconds:)), priority: priority, staleDate: stale.map(UnixTime.init(seconds:)),
        dismissalDate: dismissal.map(UnixTime.init(seconds:)), alert: alert)
}

func time(_ seconds: Double) -> UnixTime { UnixTime(seconds: seconds) }

extension Coalescer.ReceiveAction {
    var flushed: Coalescer.Flush? {
        if case .flush(let flush) = self { return flush }
        return nil
    }
}

extension Coalescer.TimerAction {
    var flushed: Coalescer.Flush? {
        if case .flush(let flush) = self { return flush }
        return nil
    }
}

@Suite("Coalescer")
struct CoalescerTests {
    let match = try! ActivityID("match-42")
    let t0 = 1_764_000_000.0

    @Test("semantic 1: every push carries the full merged state, never a diff")
    func fullState() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["teamOneScore": 0, "teamTwoScore": 0, "period": "1st"]), offset: 0, recordTime: time(t0), now: time(t0))
        let first = try #require(coalescer.timerFired(for: match, now: time(t0 + 0.25)).flushed)
        #expect(first.push.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "1st"])
        _ = coalescer.receive(update("match-42", ["teamOneScore": 1]), offset: 1, recordTime: time(t0 + 5), now: time(t0 + 5))
        let second = try #require(coalescer.timerFired(for: match, now: time(t0 + 5.25)).flushed)
        #expect(second.push.contentState == ["teamOneScore": 1, "teamTwoScore": 0, "period": "1st"])
        #expect(second.push.version == 2)
        #expect(second.snapshot.contentState == second.push.contentState)
        #expect(second.snapshot.lastOffset == 1)
    }

    @Test("null in a patch removes a field; replace_state replaces the whole state")
    func patchAndReplace() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["a": 1, "b": ["c": 2, "d": 3]]), offset: 0, recordTime: time(t0), now: time(t0))
        _ = coalescer.receive(update("match-42", ["b": ["c": nil]]), offset: 1, recordTime: time(t0), now: time(t0))
        #expect(coalescer.state(of: match)?.contentState == ["a": 1, "b": ["d": 3]])
        _ = coalescer.receive(update("match-42", ["z": true], replace: true), offset: 2, recordTime: time(t0), now: time(t0))
        #expect(coalescer.state(of: match)?.contentState == ["z": true])
    }

    @Test("semantic 3: a burst inside one window becomes one push with the merged state")
    func burst() throws {
        var coalescer = Coalescer()
        var actions: [Coalescer.ReceiveAction] = []
        for index in 0..<1000 {
            let now = t0 + Double(index) * 0.0001
            actions.append(coalescer.receive(update("match-42", ["teamOneScore": .integer(Int64(index))]), offset: Int64(index), recordTime: time(now), now: time(now)))
        }
        #expect(actions.allSatisfy { $0.flushed == nil })
        #expect(coalescer.timerFired(for: match, now: time(t0 + 0.2)) == .reschedule(at: time(t0 + 999 * 0.0001 + 0.25)))
        let flush = try #require(coalescer.timerFired(for: match, now: time(t0 + 0.4)).flushed)
        #expect(flush.push.contentState == ["teamOneScore": 999])
        #expect(flush.offsets == (0..<1000).map(Int64.init))
        #expect(coalescer.timerFired(for: match, now: time(t0 + 0.5)) == .none)
    }

    @Test("semantic 3: the window slides with each update but never past max_delay")
    func maxDelay() throws {
        var coalescer = Coalescer(configuration: .init(window: 0.25, maxDelay: 1.0))
        var last: Coalescer.ReceiveAction = .alreadyApplied
        for index in 0..<5 {
            let now = t0 + Double(index) * 0.2
            last = coalescer.receive(update("match-42", ["n": .integer(Int64(index))]), offset: Int64(index), recordTime: time(now), now: time(now))
        }
        #expect(last == .scheduleFlush(at: time(t0 + 1.0)))
        let atLimit = coalescer.receive(update("match-42", ["n": 5]), offset: 5, recordTime: time(t0 + 1.0), now: time(t0 + 1.0))
        let flush = try #require(atLimit.flushed)
        #expect(flush.push.contentState == ["n": 5])
        #expect(flush.offsets.count == 6)
    }

    @Test("semantic 3: merged pushes take the latest alert, the highest priority and the newest dates")
    func mergedFields() throws {
        var coalescer = Coalescer(configuration: .init(defaultPriority: .normal))
        _ = coalescer.receive(update("match-42", ["a": 1], priority: .normal, alert: ActivityAlert(title: "Goal", body: "1–0"), stale: t0 + 100), offset: 0, recordTime: time(t0), now: time(t0))
        _ = coalescer.receive(update("match-42", ["a": 2], priority: .immediate, alert: ActivityAlert(title: "Goal", body: "2–0"), stale: t0 + 200), offset: 1, recordTime: time(t0), now: time(t0))
        _ = coalescer.receive(update("match-42", ["a": 3], priority: .low), offset: 2, recordTime: time(t0), now: time(t0))
        let flush = try #require(coalescer.timerFired(for: match, now: time(t0 + 1)).flushed)
        #expect(flush.push.alert == ActivityAlert(title: "Goal", body: "2–0"))
        #expect(flush.push.priority == .immediate)
        #expect(flush.push.staleDate == time(t0 + 200))
        _ = coalescer.receive(update("match-42", ["a": 4]), offset: 3, recordTime: time(t0 + 5), now: time(t0 + 5))
        let next = try #require(coalescer.timerFired(for: match, now: time(t0 + 6)).flushed)
        #expect(next.push.alert == nil, "an alert is sent once")
        #expect(next.push.priority == .normal, "no priority given: the configured default")
        #expect(next.push.staleDate == time(t0 + 200), "the stale date stays with the state")
    }

    @Test("semantic 3 and 5: end flushes at once with held updates and the dismissal date")
    func endFlushes() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["teamOneScore": 3]), offset: 0, recordTime: time(t0), now: time(t0))
        let action = coalescer.receive(update("match-42", ["period": "FT"], dismissal: t0 + 900, event: .end), offset: 1, recordTime: time(t0 + 0.01), now: time(t0 + 0.01))
        let flush = try #require(action.flushed)
        #expect(flush.push.event == .end)
        #expect(flush.push.contentState == ["teamOneScore": 3, "period": "FT"])
        #expect(flush.push.dismissalDate == time(t0 + 900))
        #expect(flush.offsets == [0, 1])
        #expect(flush.snapshot.endedAt == time(t0 + 0.01))
        #expect(coalescer.timerFired(for: match, now: time(t0 + 1)) == .none)
    }

    @Test("semantic 5: after end, updates are rejected with activity-ended")
    func closedAfterEnd() {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", [:]), offset: 0, recordTime: time(t0), now: time(t0))
        _ = coalescer.receive(update("match-42", ["a": 1], event: .end), offset: 1, recordTime: time(t0), now: time(t0))
        let late = coalescer.receive(update("match-42", ["a": 2]), offset: 2, recordTime: time(t0 + 1), now: time(t0 + 1))
        guard case .reject(let reason, let message, _) = late else {
            Issue.record("expected a rejection, got \(late)")
            return
        }
        #expect(reason == .activityEnded)
        #expect(message.contains("match-42"))
        #expect(coalescer.state(of: match)?.contentState == ["a": 1])
    }

    @Test("end for an activity with no state is refused and leaves nothing behind")
    func endWithoutState() {
        var coalescer = Coalescer()
        let action = coalescer.receive(update("match-42", ["a": 1], event: .end), offset: 0, recordTime: time(t0), now: time(t0))
        guard case .reject(let reason, let message, _) = action else {
            Issue.record("expected a rejection, got \(action)")
            return
        }
        #expect(reason == .invalidCommand)
        #expect(message.contains("no state"))
        #expect(coalescer.activityCount == 0)
    }

    @Test("a payload of exactly the limit is taken, one byte more is refused with the size the encoder measures")
    func payloadLimitBoundary() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["note": ""]), offset: 0, recordTime: time(t0), now: time(t0))
        let empty = try #require(coalescer.timerFired(for: match, now: time(t0 + 1)).flushed)
        let room = APNsPayload.deviceLimit - (try APNsPayload.encode(empty.push)).count
        // Escaped quotes count twice: the size is the encoded one, not the string's.
        let fits = String(repeating: "\"", count: room / 2) + String(repeating: "x", count: room % 2)
        let taken = coalescer.receive(update("match-42", ["note": .string(fits)]), offset: 1, recordTime: time(t0 + 2), now: time(t0 + 2))
        guard case .scheduleFlush = taken else {
            Issue.record("expected the state at the limit to be taken, got \(taken)")
            return
        }
        let flush = try #require(coalescer.timerFired(for: match, now: time(t0 + 3)).flushed)
        #expect(try APNsPayload.encode(flush.push).count == APNsPayload.deviceLimit)
        let over = coalescer.receive(update("match-42", ["note": .string(fits + "y")]), offset: 2, recordTime: time(t0 + 4), now: time(t0 + 4))
        guard case .reject(let reason, _, let details) = over else {
            Issue.record("expected a rejection one byte over the limit, got \(over)")
            return
        }
        #expect(reason == .payloadTooLarge)
        #expect(details["size"] == .integer(Int64(APNsPayload.deviceLimit + 1)))
    }

    @Test("a command that would make the push too large is refused and the state stays as it was")
    func tooLargeKeepsState() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["a": 1]), offset: 0, recordTime: time(t0), now: time(t0))
        let before = try #require(coalescer.state(of: match))
        let big = coalescer.receive(
            update("match-42", ["note": .string(String(repeating: "x", count: 5000))]), offset: 1, recordTime: time(t0), now: time(t0))
        guard case .reject(let reason, _, let details) = big else {
            Issue.record("expected a rejection, got \(big)")
            return
        }
        #expect(reason == .payloadTooLarge)
        #expect(details["limit"] == 4096)
        #expect((details["size"]?.integerValue ?? 0) > 5000)
        #expect(coalescer.state(of: match) == before)
        _ = coalescer.receive(update("match-42", ["a": 2]), offset: 2, recordTime: time(t0 + 0.1), now: time(t0 + 0.1))
        let flush = try #require(coalescer.timerFired(for: match, now: time(t0 + 1)).flushed)
        #expect(flush.push.contentState == ["a": 2])
        #expect(flush.offsets == [0, 2])
    }

    @Test("semantic 4: aps.timestamp is the event time and never decreases")
    func timestamps() throws {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("match-42", ["a": 1], at: t0 + 10), offset: 0, recordTime: time(t0 + 50), now: time(t0 + 50))
        let first = try #require(coalescer.timerFired(for: match, now: time(t0 + 51)).flushed)
        #expect(first.push.timestamp == time(t0 + 10))
        _ = coalescer.receive(update("match-42", ["a": 2], at: t0 + 5), offset: 1, recordTime: time(t0 + 60), now: time(t0 + 60))
        let second = try #require(coalescer.timerFired(for: match, now: time(t0 + 61)).flushed)
        #expect(second.push.timestamp == time(t0 + 10), "an older event time is clamped to the last one sent")
        _ = coalescer.receive(update("match-42", ["a": 3]), offset: 2, recordTime: time(t0 + 70), now: time(t0 + 70))
        let third = try #require(coalescer.timerFired(for: match, now: time(t0 + 71)).flushed)
        #expect(third.push.timestamp == time(t0 + 70), "no event time: the record's time")
    }

    @Test("semantic 7: a re-delivered command already in the restored state is recognised")
    func redelivery() throws {
        var coalescer = Coalescer()
        coalescer.restore(ActivityState(activityID: match, contentState: ["a": 5], version: 4, timestamp: time(t0), createdAt: time(t0 - 100), lastOffset: 10))
        #expect(coalescer.receive(update("match-42", ["a": 1]), offset: 9, recordTime: time(t0), now: time(t0)) == .alreadyApplied)
        #expect(coalescer.receive(update("match-42", ["a": 1]), offset: 10, recordTime: time(t0), now: time(t0)) == .alreadyApplied)
        _ = coalescer.receive(update("match-42", ["b": 2]), offset: 11, recordTime: time(t0 + 1), now: time(t0 + 1))
        let flush = try #require(coalescer.timerFired(for: match, now: time(t0 + 2)).flushed)
        #expect(flush.push.contentState == ["a": 5, "b": 2], "merging continues from the restored state")
        #expect(flush.push.version == 5)
    }

    @Test("start replaces the state, flushes at once and carries the attributes")
    func start() throws {
        var coalescer = Coalescer()
        var command = update("match-42", ["teamOneScore": 0], event: .start)
        command.attributesType = "SportsActivityAttributes"
        command.attributes = ["gameName": "Superb Owl"]
        command.alert = ActivityAlert(title: "Kick-off", body: "Owls v Hawks")
        command.inputPushToken = true
        let flush = try #require(coalescer.receive(command, offset: 0, recordTime: time(t0), now: time(t0)).flushed)
        #expect(flush.push.event == .start)
        #expect(flush.push.attributesType == "SportsActivityAttributes")
        #expect(flush.push.attributes == ["gameName": "Superb Owl"])
        #expect(flush.push.inputPushToken == true)
        _ = coalescer.receive(update("match-42", ["teamOneScore": 1]), offset: 1, recordTime: time(t0 + 1), now: time(t0 + 1))
        let next = try #require(coalescer.timerFired(for: match, now: time(t0 + 2)).flushed)
        #expect(next.push.attributesType == "SportsActivityAttributes", "every version keeps what a late start needs")
        #expect(APNsPayload.aps(for: next.push)["attributes-type"] == nil, "an update does not write it")
        #expect(next.push.inputPushToken == nil, "input-push-token goes with the start only")
    }

    @Test("flushAll drains every held activity")
    func flushAll() {
        var coalescer = Coalescer()
        _ = coalescer.receive(update("a", ["x": 1]), offset: 0, recordTime: time(t0), now: time(t0))
        _ = coalescer.receive(update("b", ["x": 2]), offset: 1, recordTime: time(t0), now: time(t0))
        #expect(coalescer.nextDeadline == time(t0 + 0.25))
        let flushes = coalescer.flushAll(now: time(t0))
        #expect(flushes.map(\.push.activityID.rawValue) == ["a", "b"])
        #expect(coalescer.nextDeadline == nil)
        #expect(coalescer.flushAll(now: time(t0)).isEmpty)
    }
}
