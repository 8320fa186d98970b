import LiveDispatchCore
import Testing

@Suite("Lock Screen rendering")
struct LockScreenTests {
    @Test("a match, a delivery and any other activity on the Lock Screen")
    func lockScreen() throws {
        let match = ActivityState(
            activityID: try ActivityID("match-1"), contentState: ["teamOneScore": 2, "teamTwoScore": 1, "period": "second_half", "minute": 78, "lastScorer": "Ada"],
            attributesType: "SportsActivityAttributes", attributes: ["teamOneName": "Owls", "teamTwoName": "Hawks"], createdAt: UnixTime(seconds: 0))
        #expect(LockScreen.render(match) == "Owls 2 – 1 Hawks · second half 78' · last goal: Ada")
        let order = ActivityState(activityID: try ActivityID("order-1"), contentState: ["status": "on_the_way", "driverName": "Zoë", "minutesUntilArrival": 12], createdAt: UnixTime(seconds: 0))
        #expect(LockScreen.render(order) == "On the way · Zoë · 12 min")
        let other = ActivityState(activityID: try ActivityID("x"), contentState: ["b": true, "a": "text"], createdAt: UnixTime(seconds: 0))
        #expect(LockScreen.render(other) == "a: text · b: true")
    }
}
