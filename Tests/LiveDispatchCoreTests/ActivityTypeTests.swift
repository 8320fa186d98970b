@testable import LiveDispatchCore
import Testing

/// The demo's match type: what the app's `ContentState` and attributes decode.
let matchType = ActivityType(
    name: "SportsActivityAttributes",
    contentState: [
        SchemaField(name: "teamOneScore", type: .int), SchemaField(name: "teamTwoScore", type: .int),
        SchemaField(name: "period", type: .enumeration(["first_half", "second_half", "full_time"])),
        SchemaField(name: "minute", type: .int, optional: true),
        SchemaField(name: "scorers", type: .array(.object([SchemaField(name: "name", type: .string), SchemaField(name: "at", type: .date)])), optional: true),
    ],
    attributes: [SchemaField(name: "teamOneName", type: .string), SchemaField(name: "teamTwoName", type: .string)])

@Suite("Activity types")
struct ActivityTypeTests {
    func mismatch(_ json: String) throws -> FieldError? {
        matchType.contentStateMismatch(try JSONValue.parse(json))
    }

    @Test("a content-state is checked as the app's decoder reads it, and the first mismatch is named by its path")
    func contentState() throws {
        #expect(try mismatch(#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half"}"#) == nil)
        #expect(try mismatch(#"{"teamOneScore": 1.0, "teamTwoScore": 0, "period": "first_half", "minute": null}"#) == nil)
        #expect(try mismatch(#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "scorers": [{"name": "Ana", "at": 786000000.5}]}"#) == nil)

        let cases: [(String, String, String)] = [
            (#"{"teamOneScore": 1.5, "teamTwoScore": 0, "period": "first_half"}"#, "content_state.teamOneScore", "expected an int, got double 1.5"),
            (#"{"teamOneScore": "1", "teamTwoScore": 0, "period": "first_half"}"#, "content_state.teamOneScore", "expected an int"),
            (#"{"teamOneScore": 1, "period": "first_half"}"#, "content_state.teamTwoScore", "is required (int) and missing"),
            (#"{"teamOneScore": 1, "teamTwoScore": null, "period": "first_half"}"#, "content_state.teamTwoScore", "is required"),
            (#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "overtime"}"#, "content_state.period", #""overtime" is not one of first_half"#),
            (#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "teamOneScor": 2}"#, "content_state.teamOneScor", "did you mean 'teamOneScore'?"),
            (#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "scorers": [{"name": "Ana", "at": "today"}]}"#, "content_state.scorers[0].at", "expected a date"),
            (#"{"teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "scorers": {"name": "Ana"}}"#, "content_state.scorers", "expected a list of object"),
            (#"[1]"#, "content_state", "expected an object"),
        ]
        for (json, path, message) in cases {
            let problem = try mismatch(json)
            #expect(problem?.field == path, "\(json)")
            #expect(problem?.message.contains(message) == true, "\(json): \(problem?.message ?? "nil")")
        }
    }

    @Test("a merge patch is checked in the fields it names when the state it applies to is not known")
    func patches() throws {
        let types = ActivityTypes([matchType])
        func refusal(_ json: String) throws -> TypeRefusal? {
            types.patchRefusal(of: try ActivityCommand(json: JSONValue.parse(json)))
        }
        #expect(try refusal(#"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"teamOneScore": 2}}"#) == nil)
        #expect(try refusal(#"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"minute": null}}"#) == nil)
        let removed = try refusal(#"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"teamOneScore": null}}"#)
        #expect(removed?.problem.field == "content_state.teamOneScore" && removed?.reason == .contentStateMismatch)
        let misspelled = try refusal(#"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"teamOneScroe": 2}}"#)
        #expect(misspelled?.problem.field == "content_state.teamOneScroe")
        // A command that names no type, or one not declared, is not checked here.
        #expect(try refusal(#"{"activity_id": "m", "content_state": {"teamOneScroe": 2}}"#) == nil)
        #expect(try refusal(#"{"activity_id": "m", "attributes_type": "Other", "content_state": {"x": 2}}"#) == nil)
        // A start is checked whole: attributes first, then its content-state.
        let start = try refusal(
            #"{"activity_id": "m", "event": "start", "attributes_type": "SportsActivityAttributes", "attributes": {"teamOneName": "Owls", "teamTwoNme": "Hawks"}, "alert": {"title": "t", "body": "b"}, "content_state": {"teamOneScore": 0}}"#)
        #expect(start?.reason == .attributesMismatch && start?.problem.field == "attributes.teamTwoName")
    }

    @Test("a refusal lists every problem with its path, a misspelled field and the required one it meant naming each other")
    func everyProblem() throws {
        let types = ActivityTypes([matchType])
        let command = try ActivityCommand(json: JSONValue.parse(
            #"{"activity_id": "m", "event": "start", "attributes_type": "SportsActivityAttributes", "attributes": {"teamOneName": "Owls", "teamTwoName": "Hawks"}, "alert": {"title": "t", "body": "b"}, "content_state": {"teamOneScroe": 1, "teamTwoScore": "0", "period": "first_half"}}"#))
        let refusal = try #require(types.patchRefusal(of: command))
        #expect(refusal.reason == .contentStateMismatch)
        #expect(refusal.problems.map(\.field) == ["content_state.teamOneScore", "content_state.teamTwoScore", "content_state.teamOneScroe"])
        #expect(refusal.problems[0].message.contains("content_state.teamOneScroe was given"), "\(refusal.problems[0])")
        #expect(refusal.problems[2].message.contains("did you mean 'teamOneScore'?"), "\(refusal.problems[2])")
        #expect(refusal.message.contains("content_state.teamOneScore: is required") && refusal.message.contains("did you mean 'teamOneScore'?"), "\(refusal.message)")
        #expect(refusal.details["count"] == 3 && refusal.details["problems"]?.arrayValue?.count == 3)
        #expect(refusal.details["path"] == "content_state.teamOneScore", "the first problem stays where readers look for it")

        // A merge patch lists each field it names that does not fit.
        let patch = try ActivityCommand(json: JSONValue.parse(
            #"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"teamOneScroe": 1, "minute": "12", "teamTwoScore": null}}"#))
        #expect(types.patchRefusal(of: patch)?.problems.map(\.field) == ["content_state.minute", "content_state.teamOneScroe", "content_state.teamTwoScore"])

        // At most 20 are listed; all are counted.
        let many = (0..<30).map { "\"extra\($0)\": 1" }.joined(separator: ", ")
        let flood = try ActivityCommand(json: JSONValue.parse(
            #"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {\#(many)}}"#))
        let flooded = try #require(types.patchRefusal(of: flood))
        #expect(flooded.problems.count == SchemaProblems.defaultLimit && flooded.count == 30)
        #expect(flooded.message.hasSuffix("(and 27 more)"), "\(flooded.message)")
    }

    @Test("a type name no configuration declares is named with the declared ones and the nearest")
    func undeclaredTypeName() {
        let types = ActivityTypes([matchType, ActivityType(name: "DeliveryActivityAttributes", contentState: [])])
        #expect(types.undeclaredProblem("SportsActivityAttributes") == nil)
        #expect(ActivityTypes.none.undeclaredProblem("Anything") == nil, "nothing is checked when no type is declared")
        let problem = types.undeclaredProblem("SportActivityAttributes")
        #expect(problem?.field == "attributes_type")
        #expect(problem?.message.contains("did you mean 'SportsActivityAttributes'?") == true, "\(problem?.message ?? "")")
        #expect(problem?.message.contains("declared: DeliveryActivityAttributes, SportsActivityAttributes") == true)
        #expect(types.undeclaredProblem("Weather")?.message.contains("did you mean") == false)
    }

    @Test("the dispatcher refuses a command that does not fit its activity's type: dead letter with the path, nothing sent, the state kept")
    func dispatcherRefuses() throws {
        var harness = DispatcherHarness()
        harness.dispatcher.useTypes(ActivityTypes([matchType]))
        let token = try DeviceToken(hex: String(repeating: "aa01", count: 16))
        harness.restore(tokens: [TokenRegistration(activityID: try ActivityID("m"), token: token, registeredAt: harness.now)])
        harness.command(0, #"{"activity_id": "m", "attributes_type": "SportsActivityAttributes", "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}}"#)
        harness.advance(by: 1)
        #expect(harness.sent.count == 1)
        #expect(!harness.observations.contains { if case .uncheckedCommand = $0 { true } else { false } })

        // A merge patch that names no type is checked on the merged state, by the activity's type.
        harness.command(1, #"{"activity_id": "m", "content_state": {"teamTwoScore": "one"}}"#)
        harness.command(2, #"{"activity_id": "m", "content_state": {"period": null}}"#)
        harness.command(3, #"{"activity_id": "m", "attributes_type": "DeliveryActivityAttributes", "content_state": {"teamOneScore": 1}}"#)
        harness.advance(by: 1)
        #expect(harness.sent.count == 1, "nothing of the refused commands was sent")
        let letters = try harness.deadLetters()
        #expect(letters.map(\.reason) == [.contentStateMismatch, .contentStateMismatch, .attributesMismatch])
        #expect(letters.map { $0.details["path"]?.stringValue } == ["content_state.teamTwoScore", "content_state.period", "attributes_type"])
        #expect(letters.allSatisfy { $0.details["type"] == "SportsActivityAttributes" && $0.origin?.offset != nil })
        #expect(harness.dispatcher.state(of: try ActivityID("m"))?.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"])
        #expect(harness.commits[.commands] == 4, "refused commands are done once dead-lettered")

        // A fitting update goes out.
        harness.command(4, #"{"activity_id": "m", "content_state": {"teamOneScore": 1, "minute": 12}}"#)
        harness.advance(by: 1)
        #expect(harness.sent.count == 2)
    }

    @Test("a command whose activity names no type, or an undeclared one, is sent unchecked and observed")
    func unchecked() throws {
        var harness = DispatcherHarness()
        harness.dispatcher.useTypes(ActivityTypes([matchType]))
        harness.restore()
        harness.command(0, #"{"activity_id": "a", "content_state": {"anything": 1}}"#)
        harness.command(1, #"{"activity_id": "b", "attributes_type": "Other", "content_state": {"anything": 1}}"#)
        let unchecked = harness.observations.compactMap { observation -> TypeChecking? in
            if case .uncheckedCommand(_, let checking) = observation { checking } else { nil }
        }
        #expect(unchecked == [.untyped, .undeclared("Other")])
        #expect(unchecked.map(\.uncheckedLabel) == ["no-type", "undeclared-type"])
        #expect(try harness.deadLetters().isEmpty)
    }
}
