import Crypto
import LiveDispatchCore
import Testing

@testable import APNsSimulator

/// The broadcast APIs' validation, called directly: no connection, no clock.
@Suite("Broadcast request rules")
struct BroadcastRulesTests {
    let base = APNsRequestRulesTests()
    static var channelsPath: String { "/1/apps/\(TestProviderToken.bundleID)/channels" }
    static var broadcastPath: String { "/4/broadcasts/apps/\(TestProviderToken.bundleID)" }
    static let createBody = Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8)

    /// A management or broadcast request: no topic, the given headers.
    func request(
        method: String = "POST", path: String = channelsPath, jwt: String?? = nil, headers: [String: String?] = [:],
        body: [UInt8] = createBody
    ) throws -> ReceivedRequest {
        var overrides: [String: String?] = ["apns-topic": nil, "apns-push-type": nil, "apns-priority": nil, "apns-expiration": nil]
        for (name, value) in headers { overrides[name] = value }
        return try base.request(method: method, path: path, jwt: jwt, replacing: overrides, body: body)
    }

    func evaluate(_ request: ReceivedRequest, channels: inout ChannelRegistry) -> APNsRequestRules.Verdict {
        var state = ConnectionTokenState()
        var next = 0
        return base.rules.evaluateChannelRequest(
            request, tokenState: &state, channels: &channels, now: APNsRequestRulesTests.now, generatedID: { "generated" },
            newChannelID: {
                next += 1
                return "Y2hhbm5lbC0\(next)AAAAAA=="
            })
    }

    func answer(_ request: ReceivedRequest, channels: inout ChannelRegistry) -> (Int, String?) {
        let verdict = evaluate(request, channels: &channels)
        return (verdict.response.status, verdict.response.reason)
    }

    @Test("requests go to the broadcast rules by path only")
    func routing() throws {
        #expect(APNsRequestRules.isChannelRequest(try request()))
        #expect(APNsRequestRules.isChannelRequest(try request(path: Self.broadcastPath)))
        #expect(!APNsRequestRules.isChannelRequest(try base.request()))
    }

    @Test("create answers 201 with the channel id; bad bodies, methods, bundles and tokens get Apple's reasons")
    func create() throws {
        var channels = ChannelRegistry()
        let created = evaluate(try request(), channels: &channels)
        #expect(created.response.status == 201)
        #expect(created.response.headers.contains(HeaderField(name: "apns-channel-id", value: "Y2hhbm5lbC01AAAAAA==")))
        #expect(created.response.headers.contains { $0.name == "apns-request-id" })
        #expect(channels.policy(of: "Y2hhbm5lbC01AAAAAA==") == .mostRecent)

        #expect(answer(try request(body: Array("{".utf8)), channels: &channels) == (400, "BadPayload"))
        #expect(answer(try request(body: Array(#"{"message-storage-policy":1}"#.utf8)), channels: &channels) == (400, "MissingPushType"))
        #expect(answer(try request(body: Array(#"{"message-storage-policy":1,"push-type":"Alert"}"#.utf8)), channels: &channels) == (400, "InvalidPushType"))
        #expect(answer(try request(body: Array(#"{"message-storage-policy":2,"push-type":"LiveActivity"}"#.utf8)), channels: &channels) == (400, "BadMessageStoragePolicy"))
        #expect(answer(try request(method: "PUT"), channels: &channels) == (405, "MethodNotAllowed"))
        #expect(answer(try request(path: "/1/apps/com.other.app/channels"), channels: &channels) == (400, "BadTopic"))
        #expect(answer(try request(path: "/1/apps/\(TestProviderToken.bundleID)/elsewhere"), channels: &channels) == (404, "BadPath"))
        #expect(answer(try request(jwt: .some(nil)), channels: &channels) == (403, "MissingProviderToken"))
        #expect(answer(try request(headers: ["apns-request-id": "nope"]), channels: &channels) == (400, "BadRequestId"))
        #expect(channels.channelIDs.count == 1)
    }

    @Test("read and delete need a known, well-formed channel id; the list names every channel")
    func readDeleteList() throws {
        var channels = ChannelRegistry()
        _ = evaluate(try request(), channels: &channels)
        let id = "Y2hhbm5lbC01AAAAAA=="
        let read = evaluate(try request(method: "GET", headers: ["apns-channel-id": id], body: []), channels: &channels)
        #expect(read.response.status == 200)
        #expect(read.response.content?["message-storage-policy"]?.integerValue == 1)
        #expect(answer(try request(method: "GET", body: []), channels: &channels) == (400, "MissingChannelId"))
        #expect(answer(try request(method: "GET", headers: ["apns-channel-id": "#"], body: []), channels: &channels) == (400, "BadChannelId"))
        #expect(answer(try request(method: "GET", headers: ["apns-channel-id": "AAAA"], body: []), channels: &channels) == (404, "ChannelNotRegistered"))
        let list = evaluate(try request(method: "GET", path: "/1/apps/\(TestProviderToken.bundleID)/all-channels", body: []), channels: &channels)
        #expect(list.response.content == ["channels": [.string(id)]])
        #expect(answer(try request(method: "DELETE", headers: ["apns-channel-id": id], body: []), channels: &channels) == (204, nil))
        #expect(channels.channelIDs.isEmpty)
        #expect(answer(try request(method: "DELETE", headers: ["apns-channel-id": id], body: []), channels: &channels) == (404, "ChannelNotRegistered"))
    }

    @Test("the channel limit refuses creation until one is deleted")
    func limit() throws {
        var channels = ChannelRegistry(limit: 1)
        #expect(answer(try request(), channels: &channels).0 == 201)
        #expect(answer(try request(), channels: &channels) == (400, "CannotCreateChannelConfig"))
        #expect(answer(try request(method: "DELETE", headers: ["apns-channel-id": "Y2hhbm5lbC01AAAAAA=="], body: []), channels: &channels).0 == 204)
        #expect(answer(try request(), channels: &channels).0 == 201)
    }

    @Test("a broadcast: update or end to a known channel, push type liveactivity, expiration 0 when nothing is stored")
    func broadcast() throws {
        var channels = ChannelRegistry()
        let created = [channels.create("c3RvcmVk", policy: .mostRecent), channels.create("ZmxlZXRpbmc=", policy: .noStorage)]
        #expect(created == [true, true])
        let update = APNsRequestRulesTests.payload
        func send(_ channel: String?, _ extra: [String: String?] = [:], body: [UInt8] = update) throws -> (Int, String?) {
            var headers: [String: String?] = ["apns-push-type": "liveactivity", "apns-priority": "10", "apns-expiration": "0"]
            headers["apns-channel-id"] = channel
            for (name, value) in extra { headers[name] = value }
            return answer(try request(path: Self.broadcastPath, headers: headers, body: body), channels: &channels)
        }
        #expect(try send("c3RvcmVk", ["apns-expiration": "1764003600"]) == (200, nil))
        let accepted = evaluate(
            try request(path: Self.broadcastPath, headers: ["apns-push-type": "liveactivity", "apns-channel-id": "ZmxlZXRpbmc="], body: update),
            channels: &channels)
        #expect(accepted.channelID == "ZmxlZXRpbmc=" && accepted.deviceToken == nil && accepted.event == "update")
        #expect(try send("ZmxlZXRpbmc=", ["apns-expiration": "1764003600"]) == (400, "BadExpirationDate"))
        #expect(try send(nil) == (400, "MissingChannelId"))
        #expect(try send("AAAA") == (404, "ChannelNotRegistered"))
        #expect(try send("c3RvcmVk", ["apns-push-type": "alert"]) == (400, "InvalidPushType"))
        #expect(try send("c3RvcmVk", ["apns-push-type": nil]) == (400, "MissingPushType"))
        #expect(try send("c3RvcmVk", ["apns-priority": "7"]) == (400, "BadPriority"))
        let start = Array(#"{"aps":{"event":"start","timestamp":1764000000,"content-state":{},"attributes-type":"A","attributes":{},"alert":"x"}}"#.utf8)
        #expect(try send("c3RvcmVk", body: start) == (400, "BadPayload"))
        #expect(try send("c3RvcmVk", body: []) == (400, "PayloadEmpty"))
        #expect(try send("c3RvcmVk", body: Array(repeating: UInt8(ascii: " "), count: 5121)) == (413, "PayloadTooLarge"))
        #expect(answer(try request(method: "GET", path: Self.broadcastPath, body: update), channels: &channels) == (405, "MethodNotAllowed"))
    }
}
