import Crypto
import Foundation
import LiveDispatchCore
import Testing

/// The ingest API end to end: HTTP in, Kafka, the dispatcher, the APNs
/// simulator out; and each class of refusal.
@Suite("Ingest API", .serialized)
struct IngestAPITests {
    static let ingestKey = "ingest-key-for-tests"
    static let readKey = "read-key-for-tests"
    static let operatorKey = "operator-key-for-tests"

    static func hash(_ key: String) -> String {
        SHA256.hash(data: Array(key.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The `http:` section of a worker with an ingest key and a read-only key.
    static func http(rateLimit: Int = 1000, burst: Int = 1000, maxBody: Int = 65_536) -> String {
        """
        http:
          max_body_bytes: \(maxBody)
          rate_limit: \(rateLimit)
          rate_burst: \(burst)
          api_keys:
            - name: backend
              sha256: \(hash(ingestKey))
              scopes: [ingest]
            - name: dashboard
              sha256: \(hash(readKey))
              scopes: [read]
            - name: operator
              sha256: \(hash(operatorKey))
              scopes: [ingest, read, admin]
        """
    }

    static let bearer = ["Authorization": "Bearer \(ingestKey)", "Content-Type": "application/json"]

    static func problems(_ answer: HTTPAnswer) throws -> [String] {
        try JSONValue.parse(answer.body)["problems"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue } ?? []
    }

    @Test("an update that fits alone but not merged into the state its owner holds is refused with 413 at once")
    func oversizedMergedUpdate() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let (port, worker) = try await stack.startHTTPWorker(extra: Self.http())
        let device = String(repeating: "b2", count: 32)
        #expect(try httpRequest("POST", port: port, "/v1/tokens", headers: Self.bearer, body: #"{"activity_id": "big-http", "token": "\#(device)"}"#).status == 202)
        let history = String(repeating: "h", count: 3_000)
        #expect(try httpRequest("POST", port: port, "/v1/activities/big-http/update", headers: Self.bearer, body: #"{"content_state": {"history": "\#(history)"}}"#).status == 202)
        _ = try await stack.waitWithDiagnostics("the first push to the device", workers: [worker]) { stack.pushesByToken()[device]?.first }
        let more = #"{"content_state": {"more": "\#(String(repeating: "x", count: 1_500))"}}"#
        let refused = try httpRequest("POST", port: port, "/v1/activities/big-http/update", headers: Self.bearer, body: more)
        #expect(refused.status == 413, "\(refused)")
        #expect(try JSONValue.parse(refused.body)["message"]?.stringValue?.contains("merged into the activity's current state") == true, "\(refused.body)")
        #expect(try await worker.stop() == 0)
    }

    @Test("a token registered and an update posted over HTTP reach the device as a push; dead letters are listed and replayed; the token is unregistered")
    func updateReachesDevice() async throws {
        let stack = try await WorkerStack(partitions: 2)
        let (port, worker) = try await stack.startHTTPWorker(extra: Self.http())
        let device = String(repeating: "a1", count: 32)

        let registered = try httpRequest("POST", port: port, "/v1/tokens", headers: Self.bearer, body: #"{"activity_id": "match-http", "token": "\#(device)"}"#)
        #expect(registered.status == 202, "\(registered)")
        #expect(try JSONValue.parse(registered.body)["action"] == "register")
        // A 202 means Kafka has the registration; `tokens` and `commands` are
        // separate topics, so an update posted at once may be applied first
        // (its alert then reaches no device). Wait until the worker stored it.
        _ = try await waitFor("the registration on token-store") { () -> Bool? in
            try await stack.read("livedispatch.token-store").contains { String(decoding: $0.value ?? [], as: UTF8.self).contains(device) } ? true : nil
        }

        let update = try httpRequest(
            "POST", port: port, "/v1/activities/match-http/update", headers: Self.bearer.merging(["Idempotency-Key": "req-1"]) { $1 },
            body: #"{"content_state": {"teamOneScore": 3, "teamTwoScore": 1}, "priority": 10, "notification": {"alert": {"title": "Goal!", "body": {"loc_key": "SCORE_%@_%@", "loc_args": ["3", "1"]}}}}"#)
        #expect(update.status == 202, "\(update)")
        let accepted = try JSONValue.parse(update.body)
        #expect(accepted["command_id"] == "req-1" && accepted["activity_id"] == "match-http" && accepted["event"] == "update")

        let push = try await stack.waitWithDiagnostics("the push to the registered device", workers: [worker]) {
            stack.pushesByToken()[device]?.first
        }
        #expect(push.contentState["teamOneScore"] == .integer(3))
        #expect(push.aps["alert"]?["title"] == "Goal!")
        #expect(push.aps["alert"]?["body"] == ["loc-key": "SCORE_%@_%@", "loc-args": ["3", "1"]])

        let command = try await waitFor("the command on the commands topic") {
            try await stack.read("livedispatch.commands").first { $0.key == Array("match-http".utf8) }
        }
        #expect(try ActivityCommand(bytes: command.value ?? []).id == "req-1")

        // After the end, an update is dead-lettered; the read API lists it.
        #expect(try httpRequest("POST", port: port, "/v1/activities/match-http/end", headers: Self.bearer, body: "{}").status == 202)
        #expect(try httpRequest("POST", port: port, "/v1/activities/match-http/update", headers: Self.bearer, body: #"{"content_state": {"teamOneScore": 4}}"#).status == 202)
        let reader = ["Authorization": "Bearer \(Self.readKey)"]
        let listed = try await waitFor("the dead letter in GET /v1/dead-letters") { () -> [JSONValue]? in
            let answer = try httpRequest("GET", port: port, "/v1/dead-letters?activity=match-http&reason=activity-ended", headers: reader)
            let letters = try JSONValue.parse(answer.body)["dead_letters"]?.arrayValue ?? []
            return letters.isEmpty ? nil : letters
        }
        #expect(listed.count == 1)
        #expect(listed.first?["dead_letter"]?["activity_id"] == "match-http")

        // Replaying it produces the original command again, which is dead-lettered again.
        let id = try #require(listed.first?["id"]?.stringValue)
        let admin = ["Authorization": "Bearer \(Self.operatorKey)"]
        #expect(try httpRequest("POST", port: port, "/v1/dead-letters/\(id)/replay", headers: reader).status == 403)
        let replayed = try httpRequest("POST", port: port, "/v1/dead-letters/\(id)/replay", headers: admin)
        #expect(replayed.status == 202, "\(replayed)")
        #expect(try JSONValue.parse(replayed.body)["topic"] == "livedispatch.commands")
        _ = try await waitFor("the replayed command's dead letter") { () -> Bool? in
            let answer = try httpRequest("GET", port: port, "/v1/dead-letters?activity=match-http&reason=activity-ended", headers: reader)
            return (try JSONValue.parse(answer.body)["dead_letters"]?.arrayValue?.count ?? 0) >= 2 ? true : nil
        }
        // The same through the command line.
        let url = "http://127.0.0.1:\(port)"
        let listedByCLI = try runProcess(["dead-letters", "list", "--url", url, "--key", Self.readKey, "--activity", "match-http", "--limit", "5"])
        #expect(listedByCLI.status == 0, "\(listedByCLI.standardError)")
        #expect(try JSONValue.parse(listedByCLI.standardOutput)["dead_letters"]?.arrayValue?.count == 2)
        let replayedByCLI = try runProcess(["dead-letters", "replay", id, "--url", url], environment: ["LIVEDISPATCH_API_KEY": Self.operatorKey])
        #expect(replayedByCLI.status == 0, "\(replayedByCLI.standardError)")
        #expect(try runProcess(["dead-letters", "replay", "0-999999", "--url", url, "--key", Self.operatorKey]).status != 0)
        #expect(try httpRequest("POST", port: port, "/v1/dead-letters/0-999999/replay", headers: admin).status == 404)
        #expect(try httpRequest("POST", port: port, "/v1/dead-letters/x/replay", headers: admin).status == 400)
        #expect(try httpRequest("GET", port: port, "/v1/dead-letters?limit=0", headers: reader).status == 400)
        #expect(try httpRequest("GET", port: port, "/v1/dead-letters", headers: ["Authorization": "Bearer \(Self.ingestKey)"]).status == 403)

        let removed = try httpRequest("DELETE", port: port, "/v1/tokens/\(device)?activity_id=match-http", headers: ["Authorization": "Bearer \(Self.ingestKey)"])
        #expect(removed.status == 202, "\(removed)")
        #expect(try JSONValue.parse(removed.body)["action"] == "unregister")

        // A push-to-start token (of a declared type) is unregistered from its audience the same way.
        let starter = String(repeating: "d4", count: 32)
        let storeKey = Array(PushToStartRegistration.storeKey(try AudienceKey("fans:owls"), try DeviceToken(hex: starter)).utf8)
        let registration = #"{"kind": "push_to_start", "audience": "fans:owls", "attributes_type": "SportsActivityAttributes", "token": "\#(starter)"}"#
        #expect(try httpRequest("POST", port: port, "/v1/tokens", headers: Self.bearer, body: registration).status == 202)
        _ = try await waitFor("the push-to-start token on token-store") {
            try await stack.read("livedispatch.token-store").last { $0.key == storeKey }?.value
        }
        let ingest = ["Authorization": "Bearer \(Self.ingestKey)"]
        let unaddressed = try httpRequest("DELETE", port: port, "/v1/tokens/\(starter)?kind=push_to_start&attributes_type=SportsActivityAttributes", headers: ingest)
        #expect(unaddressed.status == 400)
        #expect(try JSONValue.parse(unaddressed.body)["problems"]?.arrayValue?.first?["pointer"] == "#/parameters/audience")
        let removedStarter = try httpRequest(
            "DELETE", port: port, "/v1/tokens/\(starter)?kind=push_to_start&audience=fans:owls&attributes_type=SportsActivityAttributes", headers: ingest)
        #expect(removedStarter.status == 202, "\(removedStarter)")
        #expect(try JSONValue.parse(removedStarter.body)["audience"] == "fans:owls")
        _ = try await waitFor("the push-to-start token removed from token-store (a tombstone)") { () -> Bool? in
            let newest = try await stack.read("livedispatch.token-store").last { $0.key == storeKey }
            return newest != nil && newest?.value == nil ? true : nil
        }
        #expect(try await worker.stop() == 0)
    }

    @Test("two workers answer the same activity query alike, from Kafka")
    func activityFromEitherWorker() async throws {
        let stack = try await WorkerStack(partitions: 2)
        let first = try await stack.startHTTPWorker(extra: Self.http())
        let second = try await stack.startHTTPWorker(extra: Self.http(), restoring: 1)
        let device = String(repeating: "b2", count: 32)
        let other = String(repeating: "c3", count: 32)
        for token in [device, other] {
            #expect(try httpRequest("POST", port: first.port, "/v1/tokens", headers: Self.bearer, body: #"{"activity_id": "match-read", "token": "\#(token)"}"#).status == 202)
        }
        let reader = ["Authorization": "Bearer \(Self.readKey)"]
        // Both registered before the push, so both get it.
        _ = try await stack.waitWithDiagnostics("the tokens on token-store", workers: [first.worker, second.worker]) { () -> Bool? in
            let answer = try httpRequest("GET", port: first.port, "/v1/activities/match-read", headers: reader)
            guard answer.status == 200, try JSONValue.parse(answer.body)["tokens"]?["count"] == .integer(2) else { return nil }
            return true
        }
        #expect(try httpRequest(
            "POST", port: second.port, "/v1/activities/match-read/update", headers: Self.bearer,
            body: #"{"content_state": {"teamOneScore": 5}}"#).status == 202)
        var views: [JSONValue] = []
        for port in [first.port, second.port] {
            views.append(try await stack.waitWithDiagnostics("worker on \(port) to show the state", workers: [first.worker, second.worker]) { () -> JSONValue? in
                let answer = try httpRequest("GET", port: port, "/v1/activities/match-read", headers: reader)
                guard answer.status == 200 else { return nil }
                let view = try JSONValue.parse(answer.body)
                // Not a ternary: its `nil` would be JSONValue.null, a value, and end the wait.
                guard view["state"]?["content_state"]?["teamOneScore"] == .integer(5), view["pushes"]?.arrayValue?.isEmpty == false else { return nil }
                return view
            })
        }
        #expect(views[0]["version"] == views[1]["version"])
        #expect(views[0]["tokens"]?["count"] == .integer(2))
        #expect(views[0]["tokens"]?["items"]?.arrayValue?.first?["token"] == .string(device))
        let outcome = views[1]["tokens"]?["items"]?.arrayValue?.first?["last_outcome"]
        #expect(outcome?["result"] == "delivered" && outcome?["version"] == .integer(1) && outcome?["kind"] == "update" && outcome?["derived"] == .bool(true))

        // The tokens route pages with a cursor, from either worker.
        let firstPage = try JSONValue.parse(httpRequest("GET", port: second.port, "/v1/activities/match-read/tokens?limit=1", headers: reader).body)
        #expect(firstPage["count"] == .integer(2))
        #expect(firstPage["items"]?.arrayValue?.map { $0["token"] } == [.string(device)])
        #expect(firstPage["next_cursor"] == .string(device))
        let secondPage = try JSONValue.parse(httpRequest(
            "GET", port: first.port, "/v1/activities/match-read/tokens?limit=1&cursor=\(device.uppercased())", headers: reader).body)
        #expect(secondPage["items"]?.arrayValue?.map { $0["token"] } == [.string(other)])
        #expect(secondPage["items"]?.arrayValue?.first?["last_outcome"]?["result"] == "delivered")
        #expect(secondPage["next_cursor"] == nil)
        let badCursor = try httpRequest("GET", port: first.port, "/v1/activities/match-read/tokens?cursor=xyz", headers: reader)
        #expect(badCursor.status == 400)
        #expect(try JSONValue.parse(badCursor.body)["problems"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue } == ["#/parameters/cursor"])
        #expect(views[0]["ended"] == .bool(false))
        let listed = try JSONValue.parse(httpRequest("GET", port: second.port, "/v1/activities?query=read", headers: reader).body)
        #expect(listed["activities"]?.arrayValue?.compactMap { $0["activity_id"]?.stringValue } == ["match-read"])
        #expect(try httpRequest("GET", port: first.port, "/v1/activities/never-seen", headers: reader).status == 404)
        #expect(try httpRequest("GET", port: first.port, "/v1/activities/match-read?tokens_limit=0", headers: reader).status == 400)
        #expect(try await first.worker.stop() == 0)
        #expect(try await second.worker.stop() == 0)
    }

    @Test("refusals: 400 with a pointer per bad field, 401, 403, 413, 429 with Retry-After; the document is served")
    func refusals() async throws {
        let stack = try await WorkerStack(partitions: 1)
        let (port, worker) = try await stack.startHTTPWorker(extra: Self.http(rateLimit: 1, burst: 25, maxBody: 2048))
        let update = "/v1/activities/match-400/update"

        let document = try httpRequest("GET", port: port, "/v1/openapi.json")
        #expect(document.status == 200)
        #expect(try JSONValue.parse(document.body)["openapi"] == "3.1.0")

        // 400: the commands topic's decoder, and the schema, each name the field.
        #expect(try Self.problems(httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"priority": 3}"#)) == ["/priority"])
        #expect(try Self.problems(httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"stale_date": 1e300}"#)) == ["/stale_date"])
        #expect(try Self.problems(httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"content_state": "nope"}"#)) == ["/content_state"])
        #expect(try Self.problems(httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"alert": {"title": "t"}}"#)) == ["/alert/body"])
        let notJSON = try httpRequest("POST", port: port, update, headers: Self.bearer, body: "{")
        #expect(notJSON.status == 400)
        #expect(try JSONValue.parse(notJSON.body)["error"] == "invalid-json")
        let unknown = try httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"colour": "blue"}"#)
        #expect(unknown.status == 400)
        let badToken = try httpRequest("POST", port: port, "/v1/tokens", headers: Self.bearer, body: #"{"activity_id": "a", "token": "abc"}"#)
        #expect(try Self.problems(badToken) == ["/token"])

        // 401 and 403.
        let anonymous = try httpRequest("POST", port: port, update, headers: ["Content-Type": "application/json"], body: "{}")
        #expect(anonymous.status == 401)
        #expect(try JSONValue.parse(anonymous.body)["error"] == "unauthorized")
        #expect(try httpRequest("POST", port: port, update, headers: ["Authorization": "Bearer wrong", "Content-Type": "application/json"], body: "{}").status == 401)
        #expect(try httpRequest("POST", port: port, update, headers: ["Authorization": "Bearer \(Self.readKey)", "Content-Type": "application/json"], body: "{}").status == 403)

        // 413: over http.max_body_bytes.
        let large = #"{"content_state": {"text": ""# + String(repeating: "x", count: 4096) + #""}}"#
        let tooLarge = try httpRequest("POST", port: port, update, headers: Self.bearer, body: large)
        #expect(tooLarge.status == 413)
        #expect(try JSONValue.parse(tooLarge.body)["error"] == "too-large")

        // The rules explained: a read key may, an ingest-only key may not.
        let explain = #"{"topic": "sports.scores", "event": \#(goal("m1", home: 1, away: 0))}"#
        let explained = try httpRequest(
            "POST", port: port, "/v1/rules/explain", headers: ["Authorization": "Bearer \(Self.readKey)", "Content-Type": "application/json"], body: explain)
        #expect(explained.status == 200, "\(explained)")
        let outcomes = try JSONValue.parse(explained.body)["rules"]?.arrayValue ?? []
        #expect(outcomes.contains { $0["status"] == "matched" && $0["commands"]?.arrayValue?.first?["activity_id"] == "match-m1" }, "\(explained.body)")
        #expect(try httpRequest("POST", port: port, "/v1/rules/explain", headers: Self.bearer, body: explain).status == 403)

        // 429: the key's burst is spent; Retry-After says when to come back.
        let limited = try await waitFor("the rate limit", timeout: .seconds(60)) { () -> HTTPAnswer? in
            let answer = try httpRequest("POST", port: port, update, headers: Self.bearer, body: #"{"content_state": {"n": 1}}"#)
            return answer.status == 429 ? answer : nil
        }
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
        #expect(try JSONValue.parse(limited.body)["error"] == "rate-limited")
        #expect(try await worker.stop() == 0)
    }
}
