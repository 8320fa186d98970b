import Foundation
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchRules
import OpenAPIRuntime
import Testing

@Suite("Rules explain over HTTP")
struct ExplainRulesTests {
    /// The rules shipped in Config/rules.
    static func shippedRules() throws -> RuleSet {
        let directory = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Config/rules").path
        return try RuleSetStore(directory: directory).current
    }

    let now = UnixTime(seconds: 1_770_000_000)

    func request(_ topic: String, _ event: [String: (any Sendable)?], now: Components.Schemas.Date? = nil) throws -> Components.Schemas.ExplainRequest {
        .init(topic: topic, event: try OpenAPIObjectContainer(unvalidatedValue: event), now: now)
    }

    @Test("each rule says whether it read the topic, matched with its commands, or why not")
    func outcomes() throws {
        let rules = try Self.shippedRules()
        let event: [String: (any Sendable)?] = ["order_id": "A-1", "status": "on_the_way", "eta": "2026-02-08T19:45:00Z", "driver": ["name": "Zoë"]]
        let explanation = try WorkerAPI.explain(request("delivery.orders", event), rules: rules, now: now).get()
        #expect(explanation.topic == "delivery.orders")
        let byRule = Dictionary(uniqueKeysWithValues: explanation.rules.map { ($0.rule, $0) })
        let progress = try #require(byRule["delivery-progress"])
        #expect(progress.status == .matched)
        let command = try #require(progress.commands?.first)
        #expect(command.value["activity_id"] as? String == "order-A-1")
        #expect(byRule["driver-arriving"]?.status == .notMatched)
        #expect(byRule["driver-arriving"]?.reasons?.isEmpty == false)
        #expect(explanation.rules.contains { $0.status == .otherTopic })
    }

    @Test("a date for now() out of range is a 400 at /now")
    func badNow() throws {
        let rules = try Self.shippedRules()
        guard case .failure(let error) = WorkerAPI.explain(try request("delivery.orders", [:], now: .case1(1e300)), rules: rules, now: now) else {
            Issue.record("1e300 must be refused")
            return
        }
        #expect(error.problems.map(\.pointer) == ["/now"])
        guard case .failure(let textError) = WorkerAPI.explain(try request("delivery.orders", [:], now: .case2("soon")), rules: rules, now: now) else {
            Issue.record("\"soon\" must be refused")
            return
        }
        #expect(textError.problems.map(\.pointer) == ["/now"])
    }
}
