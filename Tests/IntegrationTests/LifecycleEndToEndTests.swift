import Foundation
import LiveDispatchCore
import Testing

/// An activity's whole life as real processes (the embedded Kafka cluster,
/// the APNs simulator over TLS, `livedispatch run`) while APNs fails part
/// of the requests: the end reaches every device before anything is
/// dropped, and the dismissed id stays ended.
@Suite("Activity lifecycle end to end", .serialized)
struct LifecycleEndToEndTests {
    /// The shipped sports rules with the final whistle dismissing the
    /// activity at once (`dismiss_after: 0s`), in a directory of their own.
    static func rulesDismissingAtFullTime() throws -> String {
        let directory = try TestPaths.temporaryDirectory("rules")
        let shipped = try String(
            contentsOf: TestPaths.repositoryRoot.appendingPathComponent("Config/rules/sports.yaml"), encoding: .utf8)
        let edited = shipped.replacingOccurrences(of: "dismiss_after: 15m", with: "dismiss_after: 0s")
        guard edited != shipped else { throw TestSetupError("Config/rules/sports.yaml has no 'dismiss_after: 15m' to change") }
        try edited.write(to: directory.appendingPathComponent("sports.yaml"), atomically: true, encoding: .utf8)
        return directory.path
    }

    @Test("30 % of APNs requests failing (seeded), a match dismissed at full time: every device's last push is its one end, none was sent a start, and late events are dead-lettered activity-ended and never sent, also after a restart")
    func endReachesEveryDevice() async throws {
        let stack = try await WorkerStack(simulatorFlags: ["--error-rate", "0.3", "--error-statuses", "429,500,503", "--seed", "45"])
        let adminPort = try freePort()
        // Retries generous enough that every push gets through: a send fails
        // 40 times in a row with a chance of 0.3^40.
        let configuration = try stack.writeConfiguration(
            window: "50ms", adminPort: adminPort, rules: try Self.rulesDismissingAtFullTime(), extra: """
                retry:
                  max_attempts: 40
                  max_elapsed: 5m
                  base_delay: 10ms
                  max_delay: 200ms
                """)
        var worker = try await stack.startWorker(configuration: configuration)
        let (match, activity) = ("life", "match-life")
        let devices = (0..<6).map { token($0, salt: 45) }
        for device in devices { try await stack.register(device, for: activity) }
        try await waitFor("the registrations in token-store") {
            try await stack.read("livedispatch.token-store").count >= devices.count ? true : nil
        }
        func everyDevice(_ what: String, _ has: @escaping (RecordedLine) -> Bool) async throws {
            _ = try await stack.waitWithDiagnostics(what, workers: [worker]) {
                let byToken = stack.pushesByToken()
                return devices.allSatisfy { byToken[$0]?.contains(where: has) == true } ? true : nil
            }
        }

        // The match, each step on every device before the next.
        try await stack.produce("sports.scores", key: match, #"{"type": "kickoff", "match_id": "\#(match)", "home_team": "Owls", "away_team": "Hawks"}"#)
        try await everyDevice("the kick-off on every device") { $0.contentState["period"] == "first_half" }
        try await stack.produce("sports.scores", key: match, goal(match, home: 1, away: 0, minute: 12))
        try await everyDevice("the first goal on every device") { $0.contentState["teamOneScore"] == 1 }
        try await stack.produce("sports.scores", key: match, goal(match, home: 1, away: 1, minute: 40, scorer: "Grace"))
        try await everyDevice("the equaliser on every device") { $0.contentState["teamTwoScore"] == 1 }
        try await stack.produce("sports.scores", key: match, goal(match, home: 2, away: 1, minute: 81, scorer: "Lin"))
        try await everyDevice("the winner on every device") { $0.contentState["teamOneScore"] == 2 }
        try await stack.produce("sports.scores", key: match, #"{"type": "final_whistle", "match_id": "\#(match)", "score": {"home": 2, "away": 1}}"#)
        try await everyDevice("the end on every device") { $0.event == "end" }

        // The end reached every device, so the activity is dismissed at
        // once: its state leaves a marker that keeps the id ended.
        let marker = try await stack.waitWithDiagnostics("the dismissed marker on state", workers: [worker]) { () -> JSONValue? in
            let last = try await stack.read("livedispatch.state").last { $0.key == Array(activity.utf8) }
            guard let value = last?.value, let snapshot = try? JSONValue.parse(value), snapshot["dismissed_at"] != nil else { return nil }
            return snapshot
        }
        #expect(marker["ended_at"]?.numberValue != nil)
        #expect((marker["content_state"]?.objectValue ?? [:]).isEmpty, "a marker keeps no content: \(marker)")
        let atFullTime = stack.pushesByToken()

        // A late goal after full time, and a late update command.
        try await stack.produce("sports.scores", key: match, goal(match, home: 2, away: 2, minute: 95, scorer: "Late"))
        try await stack.produce("livedispatch.commands", key: activity, #"{"activity_id": "\#(activity)", "content_state": {"teamTwoScore": 3}}"#)
        _ = try await stack.waitWithDiagnostics("both late commands dead-lettered activity-ended", workers: [worker]) {
            try await stack.deadLetters().filter { $0.reason == .activityEnded && $0.activityID?.rawValue == activity }.count >= 2 ? true : nil
        }
        try await waitFor("nothing left in progress") {
            let metrics = try stack.metrics(port: adminPort)
            func gauge(_ name: String) -> Double? {
                metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            return gauge("livedispatch_records_in_progress") == 0 && gauge("livedispatch_sends_in_flight") == 0 ? true : nil
        }
        let metrics = try stack.metrics(port: adminPort)
        #expect(WorkerStack.counter("livedispatch_pushes_total", labels: "outcome=\"retryable\"", in: metrics) >= 5, "the simulator failed pushes")
        #expect(try await worker.stop() == 0)

        // Restarted, the worker restores the marker: the id is still ended.
        worker = try await stack.startWorker(configuration: configuration)
        try await stack.produce("sports.scores", key: match, goal(match, home: 3, away: 2, minute: 97, scorer: "Later"))
        _ = try await stack.waitWithDiagnostics("the late goal after the restart dead-lettered activity-ended", workers: [worker]) {
            try await stack.deadLetters().filter { $0.reason == .activityEnded && $0.activityID?.rawValue == activity }.count >= 3 ? true : nil
        }
        #expect(try await worker.stop() == 0)

        let byToken = stack.pushesByToken()
        for device in devices {
            let events = byToken[device]?.map(\.event) ?? []
            #expect(events.last == "end" && events.filter { $0 == "end" }.count == 1, "\(device.prefix(8)): \(events)")
            #expect(!events.contains("start"), "update token \(device.prefix(8)) was sent a start: \(events)")
            #expect(byToken[device]?.count == atFullTime[device]?.count, "\(device.prefix(8)) was sent something after its end")
            let end = try #require(byToken[device]?.last)
            #expect(end.contentState == ["teamOneScore": 2, "teamTwoScore": 1, "period": "full_time", "minute": 81, "lastScorer": "Lin"])
            // dismiss_after 0s: dismissed at the final whistle's time.
            let dismissal = try #require(end.aps["dismissal-date"]?.integerValue)
            let timestamp = try #require(end.aps["timestamp"]?.integerValue)
            #expect(abs(dismissal - timestamp) <= 1, "dismissal-date \(dismissal), timestamp \(timestamp)")
            let scores = (byToken[device] ?? []).compactMap { $0.contentState["teamOneScore"]?.integerValue }
            #expect(scores == scores.sorted(), "\(device.prefix(8)) went back to an older score: \(scores)")
        }
        #expect(try await stack.deadLetters().allSatisfy { $0.reason == .activityEnded }, "no push was dead-lettered")
    }
}
