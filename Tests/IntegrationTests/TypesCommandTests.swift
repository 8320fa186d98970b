import Foundation
import Testing

@Suite("livedispatch types as a process")
struct TypesCommandTests {
    @Test("checks commands, snapshots and content-states against the shipped types and names the first mismatch")
    func check() throws {
        let directory = try TestPaths.temporaryDirectory()
        let start = try writeFile(#"""
            {"activity_id": "match-1", "event": "start", "attributes_type": "SportsActivityAttributes",
             "attributes": {"gameName": "Cup", "teamOneName": "Owls", "teamTwoName": "Hawks"}, "alert": {"title": "Kick-off", "body": "Owls v Hawks"},
             "content_state": {"teamOneScore": 0, "teamTwoScore": 0, "period": "first_half"}}
            """#, "start.json", in: directory)
        let misspelled = try writeFile(#"{"activity_id": "match-1", "content_state": {"teamOneScroe": 1}}"#, "misspelled.json", in: directory)
        let removes = try writeFile(#"{"activity_id": "match-1", "content_state": {"period": null}}"#, "removes.json", in: directory)
        let fits = try writeFile(#"{"activity_id": "match-1", "content_state": {"teamOneScore": 1, "minute": 9}}"#, "fits.json", in: directory)
        let bare = try writeFile(#"{"status": "preparing"}"#, "bare.json", in: directory)

        let checked = try runProcess(["types", "check", "--state", start, fits, misspelled, removes])
        #expect(checked.status == 1, "\(checked.standardError)")
        #expect(checked.standardOutput == """
            \(fits): fits SportsActivityAttributes
            \(misspelled): does not fit SportsActivityAttributes (content-state-mismatch): content_state.teamOneScroe: is not a field of the type (did you mean 'teamOneScore'?)
            \(removes): does not fit SportsActivityAttributes (content-state-mismatch): content_state.period: is required (enum(pre_match, first_half, half_time, second_half, extra_time, penalties, full_time)) and missing

            """)

        let good = try runProcess(["types", "check", start, fits, "--type", "SportsActivityAttributes"])
        #expect(good.status == 0, "\(good.standardOutput)\(good.standardError)")

        let delivery = try runProcess(["types", "check", "--type", "DeliveryActivityAttributes", bare])
        #expect(delivery.status == 1)
        #expect(delivery.standardOutput.contains("content_state.minutesUntilArrival: is required (int) and missing"), "\(delivery.standardOutput)")

        let untyped = try runProcess(["types", "check", fits])
        #expect(untyped.status == 1)
        #expect(untyped.standardOutput.contains("names no activity type; give --type"))
        let unknown = try runProcess(["types", "check", "--type", "Nope", fits])
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("--type \"Nope\" is not declared"))
    }

    @Test("lists the declared types with their fields")
    func list() throws {
        let result = try runProcess(["types", "list"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("SportsActivityAttributes\n  content_state: {teamOneScore: int, teamTwoScore: int, period: enum("))
        #expect(result.standardOutput.contains("  attributes: {orderNumber: string, restaurant: string}"))
    }
}
