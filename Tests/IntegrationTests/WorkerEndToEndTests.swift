import Foundation
import Kafka
import LiveDispatchCore
import Testing

/// A token of 32 bytes in hex, distinct per `number` and `salt`.
func token(_ number: Int, salt: Int = 0) -> String {
    let seed = String(format: "%08x%08x", salt, number)
    return String(repeating: seed, count: 4)
}

func goal(_ match: String, home: Int, away: Int, minute: Int = 10, scorer: String = "Ada") -> String {
    #"{"type": "goal", "match_id": "\#(match)", "minute": \#(minute), "scoring_team": "Owls", "scorer": "\#(scorer)", "score": {"home": \#(home), "away": \#(away)}}"#
}

/// The worker end to end, as real processes: an embedded Kafka cluster
/// process, the APNs simulator process and `livedispatch run`.
@Suite("Worker end to end", .serialized)
struct WorkerEndToEndTests {
    @Test("events become pushes with the right headers and the full content-state for every registered token")
    func eventsBecomePushes() async throws {
        let stack = try await WorkerStack()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration())
        let tokens = [token(1, salt: 1), token(2, salt: 1), token(3, salt: 1)]
        try await stack.register(tokens[0], for: "match-e1")
        try await stack.register(tokens[1], for: "match-e1")
        try await stack.register(tokens[2], for: "match-e1", environment: "sandbox")
        try await stack.produce("sports.scores", key: "e1", #"{"type": "kickoff", "match_id": "e1", "home_team": "Owls", "away_team": "Hawks"}"#)
        let received = try await stack.waitWithDiagnostics("the kick-off pushed to every token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return tokens.allSatisfy { byToken[$0]?.isEmpty == false } ? byToken : nil
        }
        for pushToken in tokens {
            // An update token belongs to an activity already on its device:
            // the kick-off's start reaches it as an update of the same state
            // and alert, without what only a start carries.
            let kickoff = try #require(received[pushToken]?.first)
            #expect(kickoff.event == "update")
            #expect(kickoff.contentState == ["teamOneScore": 0, "teamTwoScore": 0, "period": "first_half", "minute": 0])
            #expect(kickoff.aps["alert"]?["title"] == "Kick-off!")
            #expect(kickoff.aps["attributes-type"] == nil && kickoff.aps["attributes"] == nil && kickoff.aps["input-push-token"] == nil)
            #expect(kickoff.headers["apns-push-type"] == "liveactivity")
            #expect(kickoff.headers["apns-topic"] == "com.example.livedispatch.push-type.liveactivity")
            #expect(kickoff.headers["apns-priority"] == "10")
            #expect(kickoff.headers[":path"] == "/3/device/\(pushToken)")
            let apnsID = try #require(kickoff.headers["apns-id"])
            #expect(apnsID == apnsID.lowercased() && UUID(uuidString: apnsID) != nil)
            #expect(Int(kickoff.headers["apns-expiration"] ?? "") ?? 0 > 0)
        }
        try await stack.produce("sports.scores", key: "e1", goal("e1", home: 1, away: 0, minute: 23))
        let updates = try await stack.waitWithDiagnostics("the goal's update push to every token", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return tokens.allSatisfy { (byToken[$0] ?? []).contains { $0.contentState["teamOneScore"] == 1 } } ? byToken : nil
        }
        for pushToken in tokens {
            #expect(updates[pushToken]?.map(\.event) == ["update", "update"], "\(pushToken.prefix(8))")
            let update = try #require(updates[pushToken]?.last)
            #expect(update.contentState == ["teamOneScore": 1, "teamTwoScore": 0, "period": "first_half", "minute": 23, "lastScorer": "Ada"])
            #expect(update.aps["alert"]?["title"] == "Goal for Owls!")
        }
        #expect(!stack.pushes().contains { $0.event == "start" }, "an update token is never sent a start")
        #expect(try await worker.stop() == 0)
    }

    @Test("1,000 score events for one match inside 100 ms become one push per token with the final score")
    func burst() async throws {
        let stack = try await WorkerStack()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration(window: "500ms", maxDelay: "5s"))
        let tokens = (0..<5).map { token($0, salt: 2) }
        for pushToken in tokens { try await stack.register(pushToken, for: "match-burst") }
        // Registrations are handled before any event of the match: wait for them to be stored.
        try await waitFor("the registrations in token-store") {
            try await stack.read("livedispatch.token-store").count >= tokens.count ? true : nil
        }
        let started = ContinuousClock.now
        try await stack.produceInOrder("sports.scores", (1...1000).map { (key: "burst", json: goal("burst", home: $0, away: 0, minute: $0 % 90)) })
        let elapsed = ContinuousClock.now - started
        let received = try await waitFor("a push to every token") {
            let byToken = stack.pushesByToken()
            return tokens.allSatisfy { byToken[$0]?.isEmpty == false } ? byToken : nil
        }
        // Anything more would arrive within the coalescing delay: wait that long, then count.
        try await waitFor("the coalescing delay to pass", timeout: .seconds(30)) {
            ContinuousClock.now - started > .seconds(7) ? true : nil
        }
        let final = stack.pushesByToken()
        for pushToken in tokens {
            #expect(final[pushToken]?.count == 1, "token \(pushToken) got \(final[pushToken]?.count ?? 0) pushes")
            #expect(received[pushToken]?.first?.contentState["teamOneScore"] == 1000)
        }
        #expect(elapsed < .seconds(5), "the 1,000 events were published in \(elapsed)")
        #expect(try await worker.stop() == 0)
    }

    @Test("end sends an end push with the dismissal date; later updates are dead-lettered with activity-ended")
    func endThenUpdate() async throws {
        let stack = try await WorkerStack()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration())
        let device = token(1, salt: 3)
        try await stack.register(device, for: "match-end")
        try await stack.produce("sports.scores", key: "end", goal("end", home: 1, away: 0))
        try await stack.produce("sports.scores", key: "end", #"{"type": "final_whistle", "match_id": "end", "score": {"home": 1, "away": 0}}"#)
        let end = try await waitFor("the end push") { stack.pushesByToken()[device]?.first { $0.event == "end" } }
        let dismissal = try #require(end.aps["dismissal-date"]?.integerValue)
        let timestamp = try #require(end.aps["timestamp"]?.integerValue)
        #expect(dismissal >= timestamp + 15 * 60 - 1 && dismissal <= timestamp + 15 * 60 + 5)
        #expect(end.contentState["period"] == "full_time")
        try await stack.produce("sports.scores", key: "end", goal("end", home: 1, away: 1))
        let letter = try await waitFor("the dead letter") {
            try await stack.deadLetters().first { $0.reason == .activityEnded }
        }
        #expect(letter.activityID?.rawValue == "match-end")
        #expect(stack.pushesByToken()[device]?.count == 2 || stack.pushesByToken()[device]?.count == 1)
        #expect(stack.pushesByToken()[device]?.last?.event == "end")
        #expect(try await worker.stop() == 0)
    }

    @Test("a token answered with 410 is removed and never pushed again, also after a restart")
    func unregisteredToken() async throws {
        let gone = token(9, salt: 4)
        let stack = try await WorkerStack(simulatorFlags: ["--unregistered", gone])
        let adminPort = try freePort()
        let configuration = try stack.writeConfiguration(adminPort: adminPort)
        var worker = try await stack.startWorker(configuration: configuration)
        let kept = token(1, salt: 4)
        try await stack.register(kept, for: "match-gone")
        try await stack.register(gone, for: "match-gone")
        try await stack.produce("sports.scores", key: "gone", goal("gone", home: 1, away: 0))
        try await waitFor("the push to the kept token") { stack.pushesByToken()[kept]?.isEmpty == false ? true : nil }
        try await waitFor("the 410 to remove the token") {
            let metrics = try stack.metrics(port: adminPort)
            return WorkerStack.counter("livedispatch_tokens_removed_total", labels: "", in: metrics) >= 1 ? true : nil
        }
        let tombstone = try await waitFor("a token-store tombstone") {
            try await stack.read("livedispatch.token-store").first { String(decoding: $0.key ?? [], as: UTF8.self).hasSuffix(gone) && $0.value == nil }
        }
        #expect(tombstone.value == nil)
        #expect(try await worker.stop() == 0)

        worker = try await stack.startWorker(configuration: configuration)
        try await stack.produce("sports.scores", key: "gone", goal("gone", home: 2, away: 0))
        try await waitFor("the second push to the kept token") { (stack.pushesByToken()[kept]?.count ?? 0) >= 2 ? true : nil }
        let metrics = try stack.metrics(port: adminPort)
        #expect(WorkerStack.counter("livedispatch_pushes_total", labels: "outcome=\"delivered\"", in: metrics) >= 1)
        #expect(WorkerStack.counter("livedispatch_pushes_total", labels: "outcome=\"token_invalid\"", in: metrics) == 0)
        #expect(stack.pushesByToken()[gone] == nil)
        // The backlog gauge is set when scraped; with nothing left to do it reads 0.
        try await waitFor("livedispatch_records_in_progress to read 0") {
            let scraped = try stack.metrics(port: adminPort)
            func gauge(_ name: String) -> Double? {
                scraped.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            // The worker-wide limit on sends in flight, shared by the partitions it owns.
            return gauge("livedispatch_records_in_progress") == 0 && gauge("livedispatch_sends_in_flight") == 0
                && gauge("livedispatch_sends_in_flight_limit") == 4_096 ? true : nil
        }
        #expect(try await worker.stop() == 0)
    }

    @Test("past the high watermark the worker pauses, its routing too while commands wait for it, resumes below the low one, delivers everything and counts nothing left in progress")
    func backPressure() async throws {
        // Pushes answered after 1.5 s hold the dispatcher paused long enough
        // for a second round of events to be routed while it waits.
        let stack = try await WorkerStack(simulatorFlags: ["--latency-ms", "1500"])
        let adminPort = try freePort()
        let configuration = try stack.writeConfiguration(
            window: "10ms", adminPort: adminPort, extra: "backpressure:\n  high_watermark: 6\n  low_watermark: 2")
        let worker = try await stack.startWorker(configuration: configuration)
        let matches = (0..<24).map { "bp\($0)" }
        let devices = Dictionary(uniqueKeysWithValues: matches.enumerated().map { ($1, token($0, salt: 70)) })
        for match in matches { try await stack.register(devices[match] ?? "", for: "match-\(match)") }
        try await stack.produceInOrder("sports.scores", matches.flatMap { match in
            [(key: Optional(match), json: goal(match, home: 1, away: 0)), (key: Optional(match), json: goal(match, home: 2, away: 0))]
        })
        // A round of events routed while the dispatcher is paused: its
        // partitions fetch nothing then, so only where the router's own
        // commands landed shows them waiting unread, and routing pauses for
        // them before the dispatcher resumes. (Commands fetched and not yet
        // handled can pause routing too, for a moment, while the dispatcher
        // runs: those pauses do not count here.) A round that comes too late
        // pauses the dispatcher again, for the next one.
        let pausedLine = "Routing paused: the worker is behind"
        let resumedLine = "Backlog below the low watermark"
        func count(_ text: String, in lines: some Collection<String>) -> Int { lines.filter { $0.contains(text) }.count }
        var home = 2
        var routingPausedForUnread = false
        for _ in 0..<6 where !routingPausedForUnread {
            let ready = try? await waitFor("the dispatcher paused while routing runs", timeout: .seconds(3)) { () -> (pauses: Int, resumes: Int)? in
                let lines = worker.standardErrorLines
                let dispatcherPaused = count("Backlog above the high watermark", in: lines) > count(resumedLine, in: lines)
                let routing = count(pausedLine, in: lines) == count("Routing resumed", in: lines)
                return dispatcherPaused && routing ? (count(pausedLine, in: lines), count(resumedLine, in: lines)) : nil
            }
            home += 1
            let round = home
            try await stack.produceInOrder("sports.scores", matches.map { match in (key: Optional(match), json: goal(match, home: round, away: 0)) })
            guard let ready else { continue }
            routingPausedForUnread = (try? await waitFor("routing to pause", timeout: .seconds(5)) { () -> Bool? in
                let lines = worker.standardErrorLines
                guard let pause = lines.indices.filter({ lines[$0].contains(pausedLine) }).dropFirst(ready.pauses).first else { return nil }
                // Paused before the dispatcher resumed, for the commands
                // waiting for it alone (not the router's own writes in flight).
                let backlog = lines[pause].split(separator: " ").first { $0.hasPrefix("dispatcher.backlog=") }
                    .flatMap { Int($0.dropFirst("dispatcher.backlog=".count)) } ?? 0
                return count(resumedLine, in: lines[..<pause]) == ready.resumes && backlog >= 6
            }) == true
        }
        #expect(routingPausedForUnread, "routing never paused for commands routed while the dispatcher was paused")
        let final = home
        try await stack.waitWithDiagnostics("every match's final score on its device", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return matches.allSatisfy { byToken[devices[$0] ?? ""]?.last?.contentState["teamOneScore"] == .integer(Int64(final)) } ? true : nil
        }
        try await waitUntilResumed(stack, worker, adminPort: adminPort)
        try await waitFor("routing resumed") {
            let scraped = try stack.metrics(port: adminPort)
            let paused = scraped.split(separator: "\n").first { $0.hasPrefix("livedispatch_router_paused ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
            return worker.standardErrorLines.contains { $0.contains("Routing resumed") } && paused == 0 ? true : nil
        }
        #expect(try await worker.stop() == 0)
    }

    @Test("a partition still catching up when the backlog passes the high watermark reads on, and is paused once it has caught up")
    func caughtUpPartitionHeld() async throws {
        let stack = try await WorkerStack(simulatorFlags: ["--latency-ms", "300"])
        let adminPort = try freePort()
        let configuration = try stack.writeConfiguration(
            window: "10ms", adminPort: adminPort, extra: "backpressure:\n  high_watermark: 6\n  low_watermark: 2")
        let activities = (0..<24).map { "cu\($0)" }
        let devices = Dictionary(uniqueKeysWithValues: activities.enumerated().map { ($1, token($0, salt: 71)) })
        // The devices' tokens are stored first, by a worker that then stops:
        // the next one restores them before it reads a command, so every
        // push of the catch-up waits for the simulator's answers and the
        // backlog stays up after it (registrations read beside the commands
        // could come after them, and pushes to no token end at once).
        for activity in activities { try await stack.register(devices[activity] ?? "", for: activity) }
        let first = try await stack.startWorker(configuration: configuration)
        try await stack.waitWithDiagnostics("the registrations on token-store", workers: [first]) {
            try await stack.read("livedispatch.token-store").count >= activities.count ? true : nil
        }
        #expect(try await first.stop() == 0)
        // A backlog before the worker starts: each partition catches up on it
        // (its pushes held until it has read to the end it found), so the
        // gate closes while every partition is still catching up.
        for score in 1...10 {
            for activity in activities {
                try await stack.produce("livedispatch.commands", key: activity, #"{"activity_id": "\#(activity)", "content_state": {"score": \#(score)}}"#)
            }
        }
        let worker = try await stack.startWorker(configuration: configuration)
        try await stack.waitWithDiagnostics("every activity's last score on its device", workers: [worker]) {
            let byToken = stack.pushesByToken()
            return activities.allSatisfy { byToken[devices[$0] ?? ""]?.last?.contentState["score"] == 10 } ? true : nil
        }
        #expect(worker.standardErrorLines.contains { $0.contains("Backlog above the high watermark") })
        #expect(worker.standardErrorLines.contains { $0.contains("Partitions caught up while the backlog is above the high watermark; pausing them") })
        try await waitUntilResumed(stack, worker, adminPort: adminPort)
        #expect(try await worker.stop() == 0)
    }

    /// Waits until the worker has resumed its partitions and counts nothing in progress.
    func waitUntilResumed(_ stack: WorkerStack, _ worker: BackgroundProcess, adminPort: Int) async throws {
        try await waitFor("the partitions resumed and nothing counted in progress") {
            let scraped = try stack.metrics(port: adminPort)
            let inProgress = scraped.split(separator: "\n").first { $0.hasPrefix("livedispatch_records_in_progress ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
            return worker.standardErrorLines.contains { $0.contains("Backlog below the low watermark") } && inProgress == 0 ? true : nil
        }
    }

    @Test("a repeated command id is acknowledged and not applied, also by a restarted worker")
    func repeatedCommandID() async throws {
        let stack = try await WorkerStack()
        let adminPort = try freePort()
        let configuration = try stack.writeConfiguration(adminPort: adminPort)
        var worker = try await stack.startWorker(configuration: configuration)
        let device = token(1, salt: 12)
        try await stack.register(device, for: "idem-1")
        func command(_ id: String, score: Int) -> String {
            #"{"id": "\#(id)", "activity_id": "idem-1", "content_state": {"score": \#(score)}}"#
        }
        func scores() -> [JSONValue?] { stack.pushesByToken()[device]?.map { $0.contentState["score"] } ?? [] }
        try await stack.produce("livedispatch.commands", key: "idem-1", command("goal-1", score: 1))
        try await waitFor("the first push") { scores().contains(1) ? true : nil }
        try await stack.produce("livedispatch.commands", key: "idem-1", command("goal-1", score: 99))
        try await stack.produce("livedispatch.commands", key: "idem-1", command("goal-2", score: 2))
        try await waitFor("the push of goal-2") { scores().contains(2) ? true : nil }
        try await waitFor("the duplicate to be counted") {
            WorkerStack.counter("livedispatch_commands_duplicate_total", labels: "", in: try stack.metrics(port: adminPort)) == 1 ? true : nil
        }
        #expect(try await worker.stop() == 0)

        worker = try await stack.startWorker(configuration: configuration)
        try await stack.produce("livedispatch.commands", key: "idem-1", command("goal-1", score: 77))
        try await stack.produce("livedispatch.commands", key: "idem-1", command("goal-3", score: 3))
        try await waitFor("the push of goal-3") { scores().contains(3) ? true : nil }
        #expect(!scores().contains(99) && !scores().contains(77))
        #expect(WorkerStack.counter("livedispatch_commands_duplicate_total", labels: "", in: try stack.metrics(port: adminPort)) == 1)
        #expect(try await worker.stop() == 0)
    }

    @Test("past the priority-10 budget updates go at priority 5, alerts keep 10, and the downgrades are counted")
    func priorityBudget() async throws {
        let stack = try await WorkerStack()
        let adminPort = try freePort()
        let configuration = try stack.writeConfiguration(adminPort: adminPort, extra: "budget:\n  priority_10_per_hour: 2")
        let worker = try await stack.startWorker(configuration: configuration)
        let device = token(1, salt: 13)
        try await stack.register(device, for: "budget-1")
        func priorities() -> [String] { stack.pushesByToken()[device]?.compactMap { $0.headers["apns-priority"] } ?? [] }
        let updates = [
            #"{"activity_id": "budget-1", "content_state": {"score": 1}}"#,
            #"{"activity_id": "budget-1", "content_state": {"score": 2}}"#,
            #"{"activity_id": "budget-1", "content_state": {"score": 3}}"#,
            #"{"activity_id": "budget-1", "content_state": {"score": 4}, "alert": {"title": "Goal", "body": "4-0"}}"#,
            #"{"activity_id": "budget-1", "content_state": {"score": 5}}"#,
        ]
        for (index, update) in updates.enumerated() {
            // One push each: the next command waits for the previous push.
            try await stack.produce("livedispatch.commands", key: "budget-1", update)
            try await waitFor("push \(index + 1)") { priorities().count == index + 1 ? true : nil }
        }
        #expect(priorities() == ["10", "10", "5", "10", "5"])
        try await waitFor("the downgrades to be counted") {
            WorkerStack.counter("livedispatch_priority_downgrades_total", labels: "", in: try stack.metrics(port: adminPort)) == 2 ? true : nil
        }
        #expect(try await worker.stop() == 0)
    }

    @Test("a restarted worker continues merging from the restored state")
    func restartContinuesFromRestoredState() async throws {
        let stack = try await WorkerStack()
        let configuration = try stack.writeConfiguration()
        var worker = try await stack.startWorker(configuration: configuration)
        let device = token(1, salt: 6)
        try await stack.register(device, for: "match-restart")
        // Two snapshots of the activity in the changelog: the restore takes the later.
        try await stack.produce("sports.scores", key: "restart", goal("restart", home: 1, away: 1, minute: 30, scorer: "Ada"))
        try await waitFor("the first push") { stack.pushesByToken()[device]?.isEmpty == false ? true : nil }
        try await stack.produce("sports.scores", key: "restart", goal("restart", home: 2, away: 1, minute: 40, scorer: "Lin"))
        try await waitFor("the second push") { stack.pushesByToken()[device]?.last?.contentState["lastScorer"] == "Lin" ? true : nil }
        #expect(try await worker.stop() == 0)

        worker = try await stack.startWorker(configuration: configuration)
        try await stack.produce("sports.scores", key: "restart", #"{"type": "period", "match_id": "restart", "period": "half_time", "minute": 45}"#)
        let second = try await waitFor("the push after the restart") { (stack.pushesByToken()[device]?.count ?? 0) >= 3 ? stack.pushesByToken()[device]?.last : nil }
        #expect(second.contentState == ["teamOneScore": 2, "teamTwoScore": 1, "minute": 45, "lastScorer": "Lin", "period": "half_time"])
        #expect(try await worker.stop() == 0)
    }

    @Test("bad events land in dead-letters with reasons while everything else keeps flowing")
    func badEvents() async throws {
        let stack = try await WorkerStack()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration())
        let device = token(1, salt: 7)
        try await stack.register(device, for: "match-bad")
        try await stack.produce("sports.scores", key: "bad", "{not json")
        try await stack.produce("sports.scores", key: "bad", #"{"type": "goal", "match_id": "bad", "scoring_team": "Owls"}"#)
        try await stack.produce("sports.scores", key: "bad", #"{"type": "goal", "match_id": "bad", "scoring_team": "Owls", "score": {"home": "two", "away": 0}}"#)
        let huge = String(repeating: "Ω", count: 1500)
        try await stack.produce("sports.scores", key: "bad", goal("bad", home: 1, away: 0, scorer: huge))
        // A later update inside the coalescing window would supersede the
        // oversized state before it is pushed: wait for its dead letter first.
        // A date beyond Int64 seconds once trapped every worker that read it.
        try await stack.produce("livedispatch.commands", key: "match-bad", #"{"activity_id":"match-bad","content_state":{"x":1},"timestamp":1e300}"#)
        let letters = try await waitFor("five dead letters") {
            let letters = try await stack.deadLetters()
            return letters.count >= 5 ? letters : nil
        }
        try await stack.produce("sports.scores", key: "bad", goal("bad", home: 3, away: 0, scorer: "Grace"))
        let reasons = letters.map(\.reason.rawValue).sorted()
        #expect(reasons == ["invalid-command", "invalid-json", "payload-too-large", "rule-error", "rule-error"])
        #expect(letters.first { $0.reason == .invalidCommand }?.message.contains("field 'timestamp'") == true)
        #expect(letters.first { $0.reason == .invalidJSON }?.origin?.value == "{not json")
        #expect(letters.first { $0.reason == .payloadTooLarge }.map { ($0.details["size"]?.integerValue ?? 0) > 4096 } == true)
        let last = try await waitFor("the good event's push") {
            stack.pushesByToken()[device]?.first { $0.contentState["teamOneScore"] == 3 }
        }
        #expect(last.contentState["lastScorer"] == "Grace")
        #expect(try await worker.stop() == 0)
    }

    @Test("a dead letter too large for Kafka (900 KB of control characters) is cut to fit and its event completes")
    func hugeDeadLetter() async throws {
        let stack = try await WorkerStack()
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration())
        let device = token(1, salt: 9)
        try await stack.register(device, for: "match-huge")
        // Escaped as \u0001, the value alone makes a 5.4 MB dead letter, over librdkafka's 1 MB message.max.bytes.
        try await stack.produce("sports.scores", key: "huge", String(repeating: "\u{1}", count: 900_000))
        // 700 KB of valid JSON: under limits.max_event_bytes (1 MiB), so it is routed (the JSON parser once had its own 512 KB cap).
        let padded = goal("huge", home: 1, away: 0, scorer: "Ada").dropLast() + #", "padding": "\#(String(repeating: "p", count: 700_000))"}"#
        try await stack.produce("sports.scores", key: "huge", String(padded))
        let letter = try await stack.waitWithDiagnostics("the cut dead letter", workers: [worker]) {
            try await stack.deadLetters().first
        }
        #expect(try await stack.deadLetters().count == 1)
        #expect(letter.reason == .invalidJSON)
        #expect(letter.details["truncated"] == .bool(true))
        #expect(letter.details["value_bytes"] == .integer(900_000))
        #expect(letter.origin?.topic == "sports.scores")
        #expect(letter.origin?.value.map { !$0.isEmpty && $0.unicodeScalars.allSatisfy { $0 == "\u{1}" } } == true)
        _ = try await stack.waitWithDiagnostics("the good event's push", workers: [worker]) {
            stack.pushesByToken()[device]?.first { $0.contentState["teamOneScore"] == 1 }
        }
        #expect(!worker.standardErrorLines.contains { $0.contains("Writing a routed record failed") })
        #expect(try await worker.stop() == 0)
    }

    @Test("a running worker meeting a 10,000-term rule and an alias bomb on reload keeps its rules and keeps routing")
    func hostileReload() async throws {
        let stack = try await WorkerStack()
        let rules = try TestPaths.temporaryDirectory("rules")
        for name in ["sports.yaml", "delivery.yaml"] {
            try FileManager.default.copyItem(
                at: TestPaths.repositoryRoot.appendingPathComponent("Config/rules/\(name)"), to: rules.appendingPathComponent(name))
        }
        let worker = try await stack.startWorker(configuration: try stack.writeConfiguration(rules: rules.path, reloadInterval: "100ms"))
        let device = token(1, salt: 11)
        try await stack.register(device, for: "match-reload")
        // The shipped sports rules with the first condition replaced by 10,000 terms.
        let sports = try String(contentsOf: rules.appendingPathComponent("sports.yaml"), encoding: .utf8)
        var lines = sports.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let when = try #require(lines.firstIndex { $0.hasPrefix("    when: ") })
        lines[when] = "    when: " + Array(repeating: "1", count: 10_000).joined(separator: "+") + " > 0"
        let long = lines.joined(separator: "\n")
        try long.write(to: rules.appendingPathComponent("long.yaml"), atomically: true, encoding: .utf8)
        _ = try await stack.waitWithDiagnostics("the long rule refused", workers: [worker]) {
            let lines = worker.standardErrorLines
            return lines.contains { $0.contains("Rules not reloaded") } && lines.contains { $0.contains("expression too long (10001 terms, limit 256)") } ? true : nil
        }
        var bomb = ["version: 1", "a: &a [" + Array(repeating: "x", count: 10).joined(separator: ", ") + "]"]
        for (previous, name) in zip(["a", "b", "c", "d", "e", "f", "g", "h"], ["b", "c", "d", "e", "f", "g", "h", "i"]) {
            bomb.append("\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]")
        }
        try bomb.joined(separator: "\n").write(to: rules.appendingPathComponent("long.yaml"), atomically: true, encoding: .utf8)
        _ = try await stack.waitWithDiagnostics("the alias bomb refused", workers: [worker]) {
            worker.standardErrorLines.contains { $0.contains("the YAML expands to more than") } ? true : nil
        }
        #expect(worker.isRunning)
        try await stack.produce("sports.scores", key: "reload", goal("reload", home: 2, away: 0))
        _ = try await stack.waitWithDiagnostics("a push with the old rules", workers: [worker]) {
            stack.pushesByToken()[device]?.first { $0.contentState["teamOneScore"] == 2 }
        }
        #expect(try await worker.stop() == 0)
    }

    @Test("mismatched partition counts: the worker refuses to start, naming the topics and counts")
    func mismatchedPartitions() async throws {
        let stack = try await WorkerStack(partitions: 4, tokensPartitions: 3)
        let result = try runProcess(["run", "--config", try stack.writeConfiguration()])
        #expect(result.status == 1)
        #expect(result.standardError.contains("livedispatch.commands has 4"))
        #expect(result.standardError.contains("livedispatch.tokens has 3"))
        #expect(result.standardError.contains("livedispatch.state has 4"))
        #expect(result.standardError.contains("livedispatch.token-store has 4"))
    }

    @Test("two workers share the group; kill -9 one mid fan-out: the survivor takes over and every token ends with the final state")
    func killOneWorker() async throws {
        let stack = try await WorkerStack(simulatorFlags: ["--latency-ms", "50"])
        let configuration = try stack.writeConfiguration(maxInFlight: 20)
        let first = try await stack.startWorker(configuration: configuration)
        let second = try await stack.startWorker(configuration: configuration, restoring: 2)
        try await waitFor("the first worker to give up half of the partitions") {
            first.standardErrorLines.filter { $0.contains("Partition released") }.count >= 2 ? true : nil
        }
        // Who owns the big match's partition: the second worker's only assignment tells.
        let bigPartition = Murmur2Partitioner.partition(forKey: "match-big", partitionCount: 4)
        let secondOwns = second.standardErrorLines.contains { $0.contains("kafka.partition=\(bigPartition) ") && $0.contains("Partition restored") }
        let (owner, survivor) = secondOwns ? (second, first) : (first, second)

        let bigTokens = (0..<1000).map { token($0, salt: 50) }
        let small = ["match-s1", "match-s2", "match-s3"]
        let smallTokens = Dictionary(uniqueKeysWithValues: small.enumerated().map { index, activity in
            (activity, (0..<2).map { token($0, salt: 60 + index) })
        })
        var registrations = bigTokens.map { (key: Optional("match-big"), json: #"{"activity_id": "match-big", "token": "\#($0)"}"#) }
        for (activity, tokens) in smallTokens {
            registrations += tokens.map { (key: Optional(activity), json: #"{"activity_id": "\#(activity)", "token": "\#($0)"}"#) }
        }
        try await stack.produceInOrder("livedispatch.tokens", registrations)
        try await waitFor("every registration stored", timeout: .seconds(120)) {
            try await stack.read("livedispatch.token-store").count >= registrations.count ? true : nil
        }
        try await stack.produce("sports.scores", key: "big", goal("big", home: 1, away: 0))
        for activity in small { try await stack.produce("sports.scores", key: String(activity.dropFirst(6)), goal(String(activity.dropFirst(6)), home: 1, away: 0)) }
        let bigSet = Set(bigTokens)
        try await waitFor("the fan-out to be under way", timeout: .seconds(120)) {
            stack.pushes().filter { bigSet.contains($0.token) }.count >= 100 ? true : nil
        }
        try await owner.stop(signal: SIGKILL)
        let sentBeforeKill = stack.pushes().filter { bigSet.contains($0.token) }.count
        #expect(sentBeforeKill < bigTokens.count, "the kill came after the fan-out ended")

        // The final state, published while only the survivor is left.
        try await stack.produce("sports.scores", key: "big", goal("big", home: 2, away: 0, minute: 80, scorer: "Lin"))
        for activity in small { try await stack.produce("sports.scores", key: String(activity.dropFirst(6)), goal(String(activity.dropFirst(6)), home: 2, away: 1)) }

        try await stack.waitWithDiagnostics("every token of every activity to hold the final state", workers: [survivor], timeout: .seconds(240)) {
            let byToken = stack.pushesByToken()
            let bigDone = bigTokens.allSatisfy { byToken[$0]?.last?.contentState["teamOneScore"] == 2 }
            let smallDone = smallTokens.values.joined().allSatisfy { byToken[$0]?.last?.contentState["teamTwoScore"] == 1 }
            return bigDone && smallDone ? true : nil
        }
        let byToken = stack.pushesByToken()
        for device in bigTokens {
            let scores = (byToken[device] ?? []).compactMap { $0.contentState["teamOneScore"]?.integerValue }
            #expect(scores == scores.sorted(), "token \(device) went back to an older score: \(scores)")
        }
        #expect(survivor.isRunning, "the survivor must not crash")
        #expect(try await survivor.stop() == 0)
    }
}
