import Foundation
import Kafka
import LiveDispatchCore
import Testing

/// The worker against a real Kafka-compatible broker, Tansu, rather than
/// librdkafka's own mock cluster: the demo's replay, a restart that restores
/// from the compacted topics, two workers sharing the partitions, and a
/// scale-out that moves some partitions while the others keep pushing.
@Suite("Against a real broker (Tansu)", .serialized)
struct RealBrokerEndToEndTests {
    static let owlTokens = [
        "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "0badc0ffee0badc0ffee0badc0ffee0badc0ffee0badc0ffee0badc0ffee0bad",
        "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
        "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface",
    ]
    static let deliveryToken = "d311e7e5d311e7e5d311e7e5d311e7e5d311e7e5d311e7e5d311e7e5d311e7e5"
    /// The fans' push-to-start tokens and the update tokens their devices register after the start (`fans-push-to-start.jsonl`).
    static let fanPushToStartTokens = [
        "f0f0f0f01111222233334444555566667777888899990000aaaabbbbccccdddd", "f1f1f1f1aaaabbbbccccddddeeeeffff0000111122223333444455556666777f",
    ]
    static let fanUpdateTokens = [
        "e0e0e0e0123412341234123412341234123412341234123412341234123412e0", "e1e1e1e1567856785678567856785678567856785678567856785678567856e1",
    ]

    @Test("the demo's replay: every device ends with the final state, the late goal is dead-lettered, the dashboard's metrics are served")
    func replay() async throws {
        let stack = try await RealBrokerStack()
        let record = stack.record("replay")
        let adminPort = try freePort()
        let examples = TestPaths.repositoryRoot.appendingPathComponent("Config/examples").path
        let worker = try stack.worker(
            configuration: try stack.writeConfiguration(group: "replay", adminPort: adminPort), record: record, arguments: ["--replay", examples])
        try await waitFor("the late goal's dead letter", timeout: .seconds(50)) {
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            return worker.standardOutputLines.contains { $0.contains("dead letter activity-ended") } ? true : nil
        }
        let byToken = try await waitFor("the end push to every device") {
            let byToken = RealBrokerStack.pushesByToken(record)
            return (Self.owlTokens + [Self.deliveryToken] + Self.fanUpdateTokens).allSatisfy { byToken[$0]?.last?.event == "end" } ? byToken : nil
        }
        // Push-to-start: one start per fan (the repeated start is not sent again), then the match on the new update tokens.
        for fan in Self.fanPushToStartTokens {
            let pushes = byToken[fan] ?? []
            #expect(pushes.map(\.event) == ["start"], "\(fan.prefix(8)): \(pushes.map(\.event))")
            #expect(pushes.first?.aps["input-push-token"] == 1)
            #expect(pushes.first?.aps["attributes"]?["teamTwoName"] == "Ravens")
        }
        for device in Self.fanUpdateTokens {
            let pushes = byToken[device] ?? []
            #expect(!pushes.contains { $0.event == "start" }, "an update token is never sent a start")
            #expect(pushes.contains { $0.contentState["lastScorer"] == "Ada" && $0.event == "update" })
        }
        for device in Self.owlTokens {
            let end = try #require(byToken[device]?.last)
            #expect(end.contentState["teamOneScore"] == 2 && end.contentState["teamTwoScore"] == 1, "\(device.prefix(8)): \(end.contentState)")
            #expect(end.contentState["period"] == "full_time")
        }
        #expect(byToken[Self.deliveryToken]?.last?.contentState["status"] == "delivered")
        // The owl devices hold update tokens: the kick-off's start reached
        // those registered before it as an update, carrying its alert.
        for device in Self.owlTokens.prefix(3) {
            #expect(byToken[device]?.contains { $0.event == "update" && $0.aps["alert"]?["title"] == "Kick-off!" } == true, "\(device.prefix(8))")
        }
        Self.expectNoStartToUpdateTokens(byToken)

        let metrics = try #require(try adminGet(port: adminPort, "/metrics")).body
        let served = Set(metrics.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
            line.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map { String($0).replacing(/_(bucket|sum|count)$/, with: "") }
        })
        let used = try runProcess(["metric-names"], executable: TestPaths.repositoryRoot.appendingPathComponent("scripts/check-deploy"))
        #expect(used.status == 0, "\(used.standardError)")
        let names = used.standardOutput.split(separator: "\n").map(String.init)
        #expect(names.count > 10)
        let missing = names.filter { !served.contains($0) }
        #expect(missing.isEmpty, "used by deploy/ but not served by a worker after the replay: \(missing)")
        #expect(try await worker.stop() == 0)
    }

    /// Only the fans' push-to-start tokens were sent a `start`: every other
    /// token of the replay is an update token.
    static func expectNoStartToUpdateTokens(_ byToken: [String: [RecordedLine]]) {
        for (device, pushes) in byToken where !fanPushToStartTokens.contains(device) {
            #expect(!pushes.contains { $0.event == "start" }, "update token \(device.prefix(8)) was sent a start")
        }
    }

    @Test("a restarted worker restores tokens and state from the compacted topics and continues merging")
    func restartRestores() async throws {
        let stack = try await RealBrokerStack()
        let configuration = try stack.writeConfiguration(group: "restart")
        let first = try await stack.startWorker(configuration: configuration, record: stack.record("first"), restoring: stack.partitions)
        let device = token(1, salt: 80)
        try stack.register(device, for: "match-tansu-restart")
        try stack.produce("sports.scores", [("tansu-restart", goal("tansu-restart", home: 2, away: 1, minute: 40, scorer: "Lin"))])
        try await waitFor("the first push") { RealBrokerStack.pushesByToken(stack.record("first"))[device]?.isEmpty == false ? true : nil }
        #expect(try await first.stop() == 0)

        let second = try await stack.startWorker(configuration: configuration, record: stack.record("second"), restoring: stack.partitions)
        let restored = second.standardErrorLines.filter { $0.contains("Partition restored") }
        let states = restored.compactMap { $0.firstMatch(of: /restore\.states=([0-9]+)/).flatMap { Int($0.1) } }.reduce(0, +)
        let tokens = restored.compactMap { $0.firstMatch(of: /restore\.tokens=([0-9]+)/).flatMap { Int($0.1) } }.reduce(0, +)
        #expect(states >= 1 && tokens >= 1, "the state and the token were not restored: \(restored)")
        try stack.produce("sports.scores", [("tansu-restart", #"{"type": "period", "match_id": "tansu-restart", "period": "half_time", "minute": 45}"#)])
        let push = try await waitFor("the push after the restart") { RealBrokerStack.pushesByToken(stack.record("second"))[device]?.last }
        #expect(push.contentState == ["teamOneScore": 2, "teamTwoScore": 1, "minute": 45, "lastScorer": "Lin", "period": "half_time"])
        #expect(try await second.stop() == 0)
    }

    @Test("a worker started before its broker is not ready while it cannot reach it, and starts by itself once the broker is there")
    func waitsForTheBroker() async throws {
        let port = try freePort(), adminPort = try freePort()
        let directory = try TestPaths.temporaryDirectory("livedispatch-waits")
        let library = try runProcess(["library-path"], executable: RealBrokerStack.script).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let configuration = try writeWorkerConfiguration(
            in: directory, bootstrap: "127.0.0.1:\(port)", group: "waits", partitions: 4, createTopics: true, sections: """
                apns:
                  endpoint: simulator
                admin:
                  listen: "127.0.0.1:\(adminPort)"
                """)
        let record = directory.appendingPathComponent("waits.jsonl")
        let worker = try BackgroundProcess(
            ["run", "--config", configuration, "--simulator-record", record.path], environment: ["LD_LIBRARY_PATH": library])
        let status = try await waitFor("/status saying why Kafka cannot be reached", timeout: .seconds(40)) { () -> String? in
            if !worker.isRunning { throw WaitTimeout(what: "a running worker; it exited: \(worker.standardErrorLines.suffix(5))") }
            guard let answer = try adminGet(port: adminPort, "/status"), answer.body.contains("127.0.0.1:\(port)") else { return nil }
            return answer.body
        }
        #expect(status.contains("\"phase\":\"connecting\""), "\(status)")
        #expect(try adminGet(port: adminPort, "/readyz")?.status == 503)

        let stack = try await RealBrokerStack(port: port)
        let readiness = try await waitUntilReady(port: adminPort, timeout: .seconds(90))
        #expect(readiness.phase != "connecting", "\(readiness)")
        #expect(worker.standardErrorLines.contains { $0.contains("Kafka reached") })
        let device = token(1, salt: 81)
        try stack.register(device, for: "match-tansu-waits")
        try stack.produce("sports.scores", [("tansu-waits", goal("tansu-waits", home: 1, away: 0, minute: 12, scorer: "Ito"))])
        let push = try await waitFor("the first push", timeout: .seconds(60)) { RealBrokerStack.pushesByToken(record)[device]?.last }
        #expect(push.contentState["teamOneScore"] == 1)
        #expect(try await worker.stop() == 0, "\(worker.standardErrorLines.suffix(5))")
    }

    @Test("two workers share the partitions: each activity is pushed by the worker that owns its partition")
    func twoWorkersSharePartitions() async throws {
        let stack = try await RealBrokerStack()
        let ports = [try freePort(), try freePort()]
        let records = [stack.record("one"), stack.record("two")]
        let first = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "pair", adminPort: ports[0]), record: records[0], restoring: stack.partitions)
        let second = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "pair", adminPort: ports[1]), record: records[1], restoring: 1)
        let owned = try await disjointShares(ports: ports, partitions: stack.partitions)
        let matches = (0..<8).map { "tansu-pair-\($0)" }
        for (index, match) in matches.enumerated() { try stack.register(token(index, salt: 81), for: "match-\(match)") }
        try stack.produce("sports.scores", matches.map { ($0, goal($0, home: 1, away: 0)) })
        let pushes = try await waitFor("a push to every match's device", timeout: .seconds(40)) { () -> [[String: [RecordedLine]]]? in
            let pushes = records.map(RealBrokerStack.pushesByToken)
            let all = matches.indices.allSatisfy { index in pushes.contains { $0[token(index, salt: 81)]?.isEmpty == false } }
            return all ? pushes : nil
        }
        for (index, match) in matches.enumerated() {
            let partition = Int(Murmur2Partitioner.partition(forKey: "match-\(match)", partitionCount: stack.partitions))
            let owner = owned[0].contains(partition) ? 0 : 1
            #expect(pushes[owner][token(index, salt: 81)]?.last?.contentState["teamOneScore"] == 1)
            #expect(pushes[1 - owner][token(index, salt: 81)] == nil, "\(match) was pushed by the worker that does not own partition \(partition)")
        }
        #expect(try await second.stop() == 0)
        #expect(try await first.stop() == 0)
    }

    @Test("a second worker joins under load: the partitions it takes linger on the first until claimed, then move with no older state after newer and no two pushers; the others never stop pushing")
    func partitionsMoveWhileOthersPush() async throws {
        let stack = try await RealBrokerStack()
        let ports = [try freePort(), try freePort()]
        let records = [stack.record("first"), stack.record("second")]
        let rules = try sportsRules(stack)
        let first = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "moving", adminPort: ports[0], rules: rules.path), record: records[0],
            restoring: stack.partitions)
        let matches = (0..<12).map { "tansu-move-\($0)" }
        for (index, match) in matches.enumerated() { try stack.register(token(index, salt: 91), for: "match-\(match)") }
        try stack.produce("sports.scores", matches.map { ($0, goal($0, home: 1, away: 0)) })
        _ = try await waitFor("the first push to every match", timeout: .seconds(40)) { () -> Bool? in
            let pushes = RealBrokerStack.pushesByToken(records[0])
            return matches.indices.allSatisfy { pushes[token($0, salt: 91)]?.isEmpty == false } ? true : nil
        }

        // Goals keep coming for every match while the second worker joins;
        // the first worker's share is sampled all along.
        // One round of goals, then one sample of the first worker's share,
        // over and over: the processes each round starts (kcat, curl) pace it.
        let load = Task { () -> (score: Int, samples: [(owned: Set<Int>, held: Set<Int>)]) in
            var score = 2
            var samples: [(owned: Set<Int>, held: Set<Int>)] = []
            while !Task.isCancelled, score < 5_000 {
                try? stack.produce("sports.scores", matches.map { ($0, goal($0, home: score, away: 0)) })
                score += 1
                if let answer = try? adminGet(port: ports[0], "/status"), let json = try? JSONValue.parse(answer.body) {
                    func numbers(_ key: String) -> Set<Int> { Set(json[key]?.arrayValue?.compactMap { $0.integerValue.map(Int.init) } ?? []) }
                    samples.append((numbers("owned"), numbers("partitions")))
                }
                await Task.yield()
            }
            return (score, samples)
        }
        let joined = Date().timeIntervalSince1970
        let second = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "moving", adminPort: ports[1], rules: rules.path), record: records[1], restoring: 1)
        let shares = try await disjointShares(ports: ports, partitions: stack.partitions)
        // A while of pushing under the new shares, then the last goal.
        let settled = Date().timeIntervalSince1970
        try await waitFor("the load to run on after the move", timeout: .seconds(30)) { () -> Bool? in
            Date().timeIntervalSince1970 > settled + 1.5 ? true : nil
        }
        load.cancel()
        let (last, sampled) = await load.value
        try stack.produce("sports.scores", matches.map { ($0, goal($0, home: last + 1, away: 0)) })
        let final = try await waitFor("every match's device to reach the last goal", timeout: .seconds(40)) { () -> [[String: [RecordedLine]]]? in
            let pushes = records.map(RealBrokerStack.pushesByToken)
            let done = matches.indices.allSatisfy { index in
                let all = (pushes[0][token(index, salt: 91)] ?? []) + (pushes[1][token(index, salt: 91)] ?? [])
                return all.map { $0.value["received_at"]?.numberValue ?? 0 }.max().flatMap { latest in
                    all.first { $0.value["received_at"]?.numberValue == latest }
                }?.contentState["teamOneScore"]?.integerValue == Int64(last + 1)
            }
            return done ? pushes : nil
        }

        // The partitions the first worker kept never left its hands: owned at
        // every sample from the second worker's start on.
        let kept = shares[0]
        #expect(!sampled.isEmpty)
        for sample in sampled {
            #expect(kept.isSubset(of: sample.owned), "a kept partition was not owned by the first worker: \(sample.owned.sorted()) of \(sample.held.sorted())")
        }
        for (index, match) in matches.enumerated() {
            let partition = Int(Murmur2Partitioner.partition(forKey: "match-\(match)", partitionCount: stack.partitions))
            let pushes = ((final[0][token(index, salt: 91)] ?? []) + (final[1][token(index, salt: 91)] ?? []))
                .sorted { ($0.value["received_at"]?.numberValue ?? 0) < ($1.value["received_at"]?.numberValue ?? 0) }
            let scores = pushes.compactMap { $0.contentState["teamOneScore"]?.integerValue }
            // Never an older score after a newer one, across both workers.
            #expect(scores == scores.sorted(), "\(match) (partition \(partition)): \(scores)")
            if kept.contains(partition) {
                // Pushed on through the join: no silence longer than the
                // window and a restore would make.
                let times = pushes.compactMap { $0.value["received_at"]?.numberValue }.filter { $0 >= joined && $0 <= settled }
                let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                #expect((gaps.max() ?? 0) < 1.5, "\(match) on kept partition \(partition) went \(gaps.max() ?? 0) s without a push")
                #expect(final[1][token(index, salt: 91)] == nil, "\(match) on kept partition \(partition) was pushed by the second worker")
            } else {
                let receivedAt = { (lines: [RecordedLine]?) in (lines ?? []).compactMap { $0.value["received_at"]?.numberValue } }
                let old = receivedAt(final[0][token(index, salt: 91)])
                let new = receivedAt(final[1][token(index, salt: 91)])
                #expect(!new.isEmpty, "\(match) on moved partition \(partition) was never pushed by its new owner")
                // One pusher at a time: the old owner's last push came before the new owner's first.
                #expect((old.max() ?? 0) <= (new.min() ?? .infinity), "\(match) on moved partition \(partition) was pushed by both workers at once")
                // Pushed on by the lingering old owner until the new one
                // claimed it: no silence longer than a release, a restore
                // and a window make.
                let times = (old + new).sorted().filter { $0 >= joined && $0 <= settled }
                let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                #expect((gaps.max() ?? 0) < 2.5, "\(match) on moved partition \(partition) went \(gaps.max() ?? 0) s without a push")
            }
        }
        let moves = { (worker: BackgroundProcess) in worker.standardErrorLines.filter { $0.contains("artition") || $0.contains("mark") }.suffix(40) }
        #expect(first.standardErrorLines.contains { $0.contains("Lingering partition claimed by its next owner") }, "\(moves(first))")
        #expect(second.standardErrorLines.contains { $0.contains("Previous owner released the partition") }, "\(moves(second))")
        // The goal partitions the router group moved were routed on by the
        // first worker until the second routed them: that is what kept the
        // kept partitions' activities pushing.
        let started = first.standardErrorLines.filter { $0.contains("Routing a partition given up") }
        #expect(!started.isEmpty, "the router group moved no goal partition")
        try await waitFor("each hand-over to end once the new owner routes", timeout: .seconds(40)) { () -> Bool? in
            let ended = first.standardErrorLines.filter { $0.contains("Stopped routing a partition given up") && $0.contains("newOwnerRoutes") }
            return ended.count >= started.count ? true : nil
        }
        #expect(try await second.stop() == 0)
        #expect(try await first.stop() == 0)
    }

    @Test("a worker stopping with SIGTERM routes its goal partitions until the other worker does and pushes its own until claimed: the other's activities never stop pushing, its own pause briefly")
    func stoppingWorkerHandsItsRoutingOver() async throws {
        let stack = try await RealBrokerStack()
        let ports = [try freePort(), try freePort()]
        let records = [stack.record("staying"), stack.record("leaving")]
        let rules = try sportsRules(stack)
        let staying = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "leaving", adminPort: ports[0], rules: rules.path), record: records[0],
            restoring: stack.partitions)
        let leaving = try await stack.startWorker(
            configuration: try stack.writeConfiguration(group: "leaving", adminPort: ports[1], rules: rules.path), record: records[1], restoring: 1)
        let kept = try await disjointShares(ports: ports, partitions: stack.partitions)[0]
        let matches = (0..<12).map { "tansu-leave-\($0)" }
        for (index, match) in matches.enumerated() { try stack.register(token(index, salt: 93), for: "match-\(match)") }
        try stack.produce("sports.scores", matches.map { ($0, goal($0, home: 1, away: 0)) })
        _ = try await waitFor("the first push to every match", timeout: .seconds(40)) { () -> Bool? in
            let pushes = records.map(RealBrokerStack.pushesByToken)
            return matches.indices.allSatisfy { index in pushes.contains { $0[token(index, salt: 93)]?.isEmpty == false } } ? true : nil
        }
        // Goals for every match, round after round (kcat paces it), while the second worker stops.
        let load = Task { () -> Int in
            var score = 2
            while !Task.isCancelled, score < 5_000 {
                try? stack.produce("sports.scores", matches.map { ($0, goal($0, home: score, away: 0)) })
                score += 1
                await Task.yield()
            }
            return score
        }
        let stopping = Date().timeIntervalSince1970
        #expect(try await leaving.stop() == 0)
        try await waitFor("the staying worker to own every partition", timeout: .seconds(60)) { () -> Bool? in
            try WorkerReadiness.of(port: ports[0]).flatMap { $0.phase == "ready" && Set($0.partitions) == Set(0..<stack.partitions) ? true : nil }
        }
        let settled = Date().timeIntervalSince1970
        try await waitFor("the load to run on after the hand-over", timeout: .seconds(30)) { () -> Bool? in
            Date().timeIntervalSince1970 > settled + 1.5 ? true : nil
        }
        load.cancel()
        let last = await load.value
        try stack.produce("sports.scores", matches.map { ($0, goal($0, home: last, away: 0)) })
        let final = try await waitFor("every match's device to reach the last goal", timeout: .seconds(40)) { () -> [String: [RecordedLine]]? in
            let pushes = RealBrokerStack.pushesByToken(records[0])
            let done = matches.indices.allSatisfy { pushes[token($0, salt: 93)]?.last?.contentState["teamOneScore"]?.integerValue == Int64(last) }
            return done ? pushes : nil
        }
        let left = RealBrokerStack.pushesByToken(records[1])
        for (index, match) in matches.enumerated() {
            let partition = Int(Murmur2Partitioner.partition(forKey: "match-\(match)", partitionCount: stack.partitions))
            guard kept.contains(partition) else {
                // The leaving worker's own: pushed by it until the staying one
                // claimed them, then by the staying one, never by both at once.
                let receivedAt = { (lines: [RecordedLine]?) in (lines ?? []).compactMap { $0.value["received_at"]?.numberValue } }
                let old = receivedAt(left[token(index, salt: 93)])
                let new = receivedAt(final[token(index, salt: 93)])
                #expect((old.max() ?? 0) <= (new.filter { $0 >= stopping }.min() ?? .infinity), "\(match) on moved partition \(partition) was pushed by both workers at once")
                let times = (old + new).sorted()
                let gaps = zip(times.dropFirst(), times).filter { $0 >= stopping && $1 <= settled }.map { $0 - $1 }
                #expect((gaps.max() ?? 0) < 2.5, "\(match) on moved partition \(partition) went \(gaps.max() ?? 0) s without a push")
                continue
            }
            // Pushed on through the other worker's leave, whichever worker
            // routed its goals: no silence longer than a window and a round of goals.
            // Every silence that overlaps the leave, from the last push before it to the first after.
            let times = (final[token(index, salt: 93)] ?? []).compactMap { $0.value["received_at"]?.numberValue }.sorted()
            let gaps = zip(times.dropFirst(), times).filter { $0 >= stopping && $1 <= settled }.map { $0 - $1 }
            #expect((gaps.max() ?? 0) < 1.5, "\(match) on kept partition \(partition) went \(gaps.max() ?? 0) s without a push")
            let scores = (final[token(index, salt: 93)] ?? []).compactMap { $0.contentState["teamOneScore"]?.integerValue }
            #expect(scores == scores.sorted(), "\(match) (partition \(partition)): \(scores)")
        }
        // The stopping worker routed what it owned until the staying one did.
        let started = leaving.standardErrorLines.filter { $0.contains("Routing a partition given up") }
        let ended = leaving.standardErrorLines.filter { $0.contains("Stopped routing a partition given up") }
        #expect(!started.isEmpty, "the stopping worker handed nothing over")
        // And some match on a kept partition had its goals come through one of them.
        let handedOver = Set(started.compactMap { line in
            line.range(of: "sports.scores[").flatMap { Int(line[$0.upperBound...].prefix { $0.isNumber }) }
        })
        #expect(
            matches.contains { match in
                kept.contains(Int(Murmur2Partitioner.partition(forKey: "match-\(match)", partitionCount: stack.partitions)))
                    && handedOver.contains(Int(Murmur2Partitioner.partition(forKey: match, partitionCount: stack.partitions)))
            }, "no match on a kept partition had its goals routed by the stopping worker: \(handedOver.sorted())")
        #expect(ended.count == started.count)
        #expect(ended.contains { $0.contains("newOwnerRoutes") }, "no hand-over ended with the new owner routing: \(ended)")
        #expect(leaving.standardErrorLines.contains { $0.contains("Lingering partition claimed by its next owner") })
        #expect(try await staying.stop() == 0)
    }

    /// The shares of the two workers on `ports`, once both are ready and
    /// own every partition between them, none twice.
    private func disjointShares(ports: [Int], partitions: Int) async throws -> [Set<Int>] {
        try await waitFor("both workers ready with disjoint shares of every partition", timeout: .seconds(60)) { () -> [Set<Int>]? in
            let shares = try ports.map { port in try WorkerReadiness.of(port: port).flatMap { $0.phase == "ready" ? Set($0.partitions) : nil } }
            guard let one = shares[0], let two = shares[1], !one.isEmpty, !two.isEmpty, one.isDisjoint(with: two),
                  one.union(two) == Set(0..<partitions) else { return nil }
            return [one, two]
        }
    }

    /// The sports rules alone: the router group then has only the
    /// partitions the goals come through, and moves some of them too.
    private func sportsRules(_ stack: RealBrokerStack) throws -> URL {
        let rules = stack.directory.appendingPathComponent("sports-rules")
        try FileManager.default.createDirectory(at: rules, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: TestPaths.repositoryRoot.appendingPathComponent("Config/rules/sports.yaml"), to: rules.appendingPathComponent("sports.yaml"))
        return rules
    }
}
