import Crypto
import LiveDispatchCore
import Testing

@testable import APNsSimulator

@Suite("APNs request rules")
struct APNsRequestRulesTests {
    static let now: Int64 = 1_764_000_000
    static let token = String(repeating: "ab", count: 32)
    static let payload = Array(#"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"score":1}}}"#.utf8)

    let key = P256.Signing.PrivateKey()
    var rules: APNsRequestRules {
        APNsRequestRules(
            bundleID: TestProviderToken.bundleID,
            verifier: ProviderTokenVerifier(
                teamID: TestProviderToken.teamID, keyID: TestProviderToken.keyID, publicKey: key.publicKey),
            tokenUpdateInterval: 1200)
    }

    func request(
        method: String = "POST", path: String = "/3/device/\(token)", jwt: String?? = nil,
        replacing overrides: [String: String?] = [:], body: [UInt8] = payload
    ) throws -> ReceivedRequest {
        var request = ReceivedRequest(streamID: 1)
        let authorization: String? =
            switch jwt {
            case .none: "bearer \(try TestProviderToken.make(key: key, issuedAt: Self.now))"
            case .some(let value): value
            }
        var headers: [(String, String?)] = [
            (":method", method), (":scheme", "https"), (":path", path), ("authorization", authorization),
            ("apns-push-type", "liveactivity"), ("apns-topic", "\(TestProviderToken.bundleID).push-type.liveactivity"),
            ("apns-priority", "10"), ("apns-expiration", "0"),
        ]
        for (name, value) in overrides {
            if let index = headers.firstIndex(where: { $0.0 == name }) {
                headers[index].1 = value
            } else {
                headers.append((name, value))
            }
        }
        request.headers = HeaderBlock(headers.compactMap { name, value in value.map { HeaderField(name: name, value: $0) } })
        request.appendBody(body)
        return request
    }

    func evaluate(_ request: ReceivedRequest, now: Int64 = now) -> APNsRequestRules.Verdict {
        var state = ConnectionTokenState()
        return rules.evaluate(request, tokenState: &state, now: now, generatedID: { "generated" })
    }

    @Test("a well-formed Live Activity push is accepted and its apns-id echoed in lowercase")
    func accepted() throws {
        let id = "8F1A2B3C-0000-4000-8000-00000000ABCD"
        let verdict = evaluate(try request(replacing: ["apns-id": id]))
        #expect(verdict.response == .success)
        #expect(verdict.apnsID == id.lowercased())
        #expect(verdict.deviceToken == Self.token)
        #expect(verdict.event == "update")
    }

    @Test("without an apns-id one is generated")
    func generatedID() throws {
        #expect(evaluate(try request()).apnsID == "generated")
    }

    @Test("each broken rule gets its APNs status and reason", arguments: [
        (["apns-priority": "7"], 400, "BadPriority"),
        (["apns-topic": "com.other.app.push-type.liveactivity"], 400, "DeviceTokenNotForTopic"),
        (["apns-topic": "com.example.sports"], 400, "BadTopic"),
        (["apns-topic": nil], 400, "MissingTopic"),
        (["apns-push-type": "banner"], 400, "InvalidPushType"),
        (["apns-push-type": "alert"], 400, "InvalidPushType"),
        (["apns-expiration": "soon"], 400, "BadExpirationDate"),
        (["apns-id": "not-a-uuid"], 400, "BadMessageId"),
        (["apns-collapse-id": String(repeating: "c", count: 65)], 400, "BadCollapseId"),
        (["authorization": nil], 403, "MissingProviderToken"),
        (["authorization": "bearer abc.def.ghi"], 403, "InvalidProviderToken"),
    ] as [([String: String?], Int, String)])
    func rejected(overrides: [String: String?], status: Int, reason: String) throws {
        let verdict = evaluate(try request(replacing: overrides))
        #expect(verdict.response == SimulatedResponse(status: status, reason: reason))
        #expect(!verdict.isAccepted)
    }

    @Test("paths and methods: 404 BadPath, 405 MethodNotAllowed, bad or missing tokens")
    func paths() throws {
        #expect(evaluate(try request(path: "/3/other/abcd")).response.reason == "BadPath")
        #expect(evaluate(try request(path: "/3/other/abcd")).response.status == 404)
        #expect(evaluate(try request(method: "GET")).response == SimulatedResponse(status: 405, reason: "MethodNotAllowed"))
        #expect(evaluate(try request(path: "/3/device/")).response.reason == "MissingDeviceToken")
        #expect(evaluate(try request(path: "/3/device/xyz1")).response.reason == "BadDeviceToken")
    }

    @Test("payloads: empty, too large, not JSON, missing aps.event or aps.timestamp")
    func payloads() throws {
        #expect(evaluate(try request(body: [])).response == SimulatedResponse(status: 400, reason: "PayloadEmpty"))
        let large = Array(#"{"aps":{"event":"update","timestamp":1,"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 4096)
            + Array(#""}}"#.utf8)
        #expect(evaluate(try request(body: large)).response == SimulatedResponse(status: 413, reason: "PayloadTooLarge"))
        #expect(evaluate(try request(body: Array("not json".utf8))).response.status == 400)
        #expect(evaluate(try request(body: Array(#"{"aps":{"timestamp":1}}"#.utf8))).response.status == 400)
        #expect(evaluate(try request(body: Array(#"{"aps":{"event":"update"}}"#.utf8))).response.status == 400)
        let exactly4096 = Array(#"{"aps":{"event":"end","timestamp":1},"p":""#.utf8)
        let padded = exactly4096 + Array(repeating: UInt8(ascii: "y"), count: 4096 - exactly4096.count - 2) + Array(#""}"#.utf8)
        #expect(padded.count == 4096)
        #expect(evaluate(try request(body: padded)).isAccepted)
    }

    @Test("a start needs content-state, attributes-type, attributes and an alert; input-push-token is 1")
    func starts() throws {
        let full = #"{"aps":{"event":"start","timestamp":1,"content-state":{"s":1},"attributes-type":"T","attributes":{"a":1},"alert":{"title":"t","body":"b"},"input-push-token":1}}"#
        #expect(evaluate(try request(body: Array(full.utf8))).isAccepted)
        let broken = [
            full.replacingOccurrences(of: #""attributes-type":"T","#, with: ""),
            full.replacingOccurrences(of: #""attributes":{"a":1},"#, with: ""),
            full.replacingOccurrences(of: #","alert":{"title":"t","body":"b"}"#, with: ""),
            full.replacingOccurrences(of: #""content-state":{"s":1},"#, with: ""),
            full.replacingOccurrences(of: #""input-push-token":1"#, with: #""input-push-token":2"#),
            full.replacingOccurrences(of: #""attributes-type":"T""#, with: #""attributes-type":"""#),
        ]
        for body in broken {
            #expect(evaluate(try request(body: Array(body.utf8))).response == SimulatedResponse(status: 400, reason: "BadPayload"), "\(body)")
        }
        let update = #"{"aps":{"event":"update","timestamp":1,"content-state":{"s":1}}}"#
        #expect(evaluate(try request(body: Array(update.utf8))).isAccepted, "an update needs none of them")
    }

    @Test("a provider token older than an hour is refused ExpiredProviderToken")
    func expiredToken() throws {
        let old = "bearer \(try TestProviderToken.make(key: key, issuedAt: Self.now - 3601))"
        #expect(evaluate(try request(jwt: old)).response == SimulatedResponse(status: 403, reason: "ExpiredProviderToken"))
    }

    @Test("a connection keeps its token; a new one within 20 minutes is refused, after that accepted")
    func tokenUpdates() throws {
        var state = ConnectionTokenState()
        let first = try request()
        #expect(rules.evaluate(first, tokenState: &state, now: Self.now, generatedID: { "1" }).isAccepted)
        #expect(rules.evaluate(first, tokenState: &state, now: Self.now + 60, generatedID: { "2" }).isAccepted)
        let renewed = try request(jwt: "bearer \(try TestProviderToken.make(key: key, issuedAt: Self.now + 600))")
        let early = rules.evaluate(renewed, tokenState: &state, now: Self.now + 600, generatedID: { "3" })
        #expect(early.response == SimulatedResponse(status: 429, reason: "TooManyProviderTokenUpdates"))
        let later = try request(jwt: "bearer \(try TestProviderToken.make(key: key, issuedAt: Self.now + 1300))")
        #expect(rules.evaluate(later, tokenState: &state, now: Self.now + 1300, generatedID: { "4" }).isAccepted)
        // The same token, once an hour old, expires even though it was accepted before.
        #expect(
            rules.evaluate(later, tokenState: &state, now: Self.now + 1300 + 3601, generatedID: { "5" }).response.reason
                == "ExpiredProviderToken")
    }

    @Test("duplicated headers are refused")
    func duplicates() throws {
        var duplicated = try request()
        duplicated.headers.append(name: "apns-topic", value: "com.example.sports.push-type.liveactivity")
        #expect(evaluate(duplicated).response == SimulatedResponse(status: 400, reason: "DuplicateHeaders"))
    }

    @Test("error bodies carry the reason, and the timestamp for 410; success has none")
    func bodies() {
        #expect(SimulatedResponse.success.body.isEmpty)
        #expect(String(decoding: SimulatedResponse(status: 400, reason: "BadTopic").body, as: UTF8.self) == #"{"reason":"BadTopic"}"#)
        let gone = String(decoding: SimulatedResponse(status: 410, reason: "Unregistered", timestamp: 1_764_000_000_123).body, as: UTF8.self)
        #expect(gone.contains(#""timestamp":1764000000123"#))
        #expect(gone.contains(#""reason":"Unregistered""#))
    }
}

@Suite("Generated apns-ids")
struct GeneratedIDTests {
    @Test("generated ids are distinct lowercase version-4 UUIDs")
    func uuids() {
        var random = SplitMix64(seed: 42)
        var seen: Set<String> = []
        for _ in 0..<1000 {
            let id = random.uuid()
            #expect(APNsRequestRules.isUUID(id))
            #expect(id == id.lowercased())
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(Array(id.utf8)[19]))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
        let draws = (0..<1000).map { _ in random.unit() }
        #expect(draws.allSatisfy { (0..<1).contains($0) })
    }
}
