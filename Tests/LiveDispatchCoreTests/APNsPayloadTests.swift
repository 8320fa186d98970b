import LiveDispatchCore
import Testing

@Suite("APNs payload encoding")
struct APNsPayloadTests {
    let match = try! ActivityID("match-42")

    @Test("update: timestamp, event, full content-state, stale date, relevance and alert")
    func updateGolden() throws {
        let push = LiveActivityPush(
            activityID: match, version: 3, event: .update,
            contentState: ["teamOneScore": 2, "teamTwoScore": 1, "period": "2nd", "clock": ["minute": 67]],
            timestamp: UnixTime(seconds: 1_764_000_000.75), priority: .immediate,
            staleDate: UnixTime(seconds: 1_764_003_600), dismissalDate: UnixTime(seconds: 1_764_009_000),
            relevanceScore: 50, alert: ActivityAlert(title: "Goal!", body: "Owls 2–1", sound: "default"))
        let bytes = try APNsPayload.encode(push)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":{"body":"Owls 2–1","sound":"default","title":"Goal!"},"content-state":{"clock":{"minute":67},"period":"2nd","teamOneScore":2,"teamTwoScore":1},"event":"update","relevance-score":50,"stale-date":1764003600,"timestamp":1764000000}}"#)
    }

    @Test("end: carries the dismissal date")
    func endGolden() throws {
        let push = LiveActivityPush(
            activityID: match, version: 9, event: .end, contentState: ["teamOneScore": 3, "teamTwoScore": 1],
            timestamp: UnixTime(seconds: 1_764_005_400), dismissalDate: UnixTime(seconds: 1_764_006_300))
        let bytes = try APNsPayload.encode(push)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"content-state":{"teamOneScore":3,"teamTwoScore":1},"dismissal-date":1764006300,"event":"end","timestamp":1764005400}}"#)
    }

    @Test("start: attributes-type, attributes, alert and the iOS 18 input push fields")
    func startGolden() throws {
        let push = LiveActivityPush(
            activityID: match, version: 1, event: .start, contentState: ["teamOneScore": 0, "teamTwoScore": 0],
            timestamp: UnixTime(seconds: 1_764_000_000), relevanceScore: 0.5,
            alert: ActivityAlert(title: "Kick-off", body: "Owls v Hawks"), attributesType: "SportsActivityAttributes",
            attributes: ["gameName": "Superb Owl"], inputPushToken: true, inputPushChannel: "dHN0LXNyY2gtY2hubA==")
        let bytes = try APNsPayload.encode(push)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":{"body":"Owls v Hawks","title":"Kick-off"},"attributes":{"gameName":"Superb Owl"},"attributes-type":"SportsActivityAttributes","content-state":{"teamOneScore":0,"teamTwoScore":0},"event":"start","input-push-channel":"dHN0LXNyY2gtY2hubA==","input-push-token":1,"relevance-score":0.5,"timestamp":1764000000}}"#)
    }

    @Test("a localized title and body go to APNs as loc-key and loc-args, counted as written")
    func localizedAlert() throws {
        let push = LiveActivityPush(
            activityID: match, version: 4, event: .update, contentState: ["teamOneScore": 1], timestamp: UnixTime(seconds: 1_764_000_000),
            alert: ActivityAlert(title: .localized(key: "GOAL_TITLE", arguments: ["Ada", "67"]), body: .localized(key: "GOAL_BODY", arguments: [])))
        let bytes = try APNsPayload.encode(push)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":{"body":{"loc-key":"GOAL_BODY"},"title":{"loc-args":["Ada","67"],"loc-key":"GOAL_TITLE"}},"content-state":{"teamOneScore":1},"event":"update","timestamp":1764000000}}"#)
        #expect(APNsPayload.size(of: push) == bytes.count)
    }

    @Test("every combination of members is written in the serializer's key order, and counted as written")
    func canonicalOrder() throws {
        for event in [ActivityEvent.start, .update, .end] {
            for mask in 0..<(1 << 7) {
                func has(_ bit: Int) -> Bool { mask & (1 << bit) != 0 }
                let push = LiveActivityPush(
                    activityID: match, version: 1, event: event, contentState: ["a\"b": [1, 2.5, nil], "z": "é\n"],
                    timestamp: UnixTime(seconds: 1_764_000_000.5), staleDate: has(0) ? UnixTime(seconds: 1_764_003_600) : nil,
                    dismissalDate: has(1) ? UnixTime(seconds: 1_764_006_300) : nil, relevanceScore: has(2) ? (has(6) ? 0.25 : 1e15) : nil,
                    alert: has(3) ? ActivityAlert(title: "T", body: "B") : nil, attributesType: has(4) ? "Attrs" : nil,
                    attributes: has(4) ? ["k": 1] : nil, inputPushToken: has(5) ? true : nil, inputPushChannel: has(6) ? "ch" : nil)
                let bytes = try APNsPayload.encode(push)
                #expect(try JSONValue.parse(bytes).serialized() == bytes, "\(String(decoding: bytes, as: UTF8.self))")
                #expect(APNsPayload.size(of: push) == bytes.count)
            }
        }
    }

    @Test("start-only fields are not sent on update; dismissal only on end")
    func fieldsByEvent() throws {
        let push = LiveActivityPush(
            activityID: match, version: 2, event: .update, contentState: [:], timestamp: UnixTime(seconds: 1),
            dismissalDate: UnixTime(seconds: 5), attributesType: "T", attributes: ["a": 1], inputPushToken: true)
        #expect(String(decoding: try APNsPayload.encode(push), as: UTF8.self) == #"{"aps":{"content-state":{},"event":"update","timestamp":1}}"#)
    }

    @Test("a payload over 4096 bytes is refused with its size; broadcast allows 5120")
    func oversize() throws {
        func push(filler: Int) -> LiveActivityPush {
            LiveActivityPush(
                activityID: match, version: 1, event: .update,
                contentState: ["note": .string(String(repeating: "x", count: filler))], timestamp: UnixTime(seconds: 1_764_000_000))
        }
        let overhead = try APNsPayload.encode(push(filler: 0)).count
        #expect(try APNsPayload.encode(push(filler: 4096 - overhead)).count == 4096)
        #expect(throws: PayloadTooLargeError(activityID: match, size: 4097, limit: 4096)) {
            try APNsPayload.encode(push(filler: 4097 - overhead))
        }
        #expect(try APNsPayload.encode(push(filler: 5120 - overhead), for: .broadcast).count == 5120)
        #expect(throws: PayloadTooLargeError(activityID: match, size: 5121, limit: 5120)) {
            try APNsPayload.encode(push(filler: 5121 - overhead), for: .broadcast)
        }
        let message = PayloadTooLargeError(activityID: match, size: 4097, limit: 4096).description
        #expect(message.contains("4097 bytes") && message.contains("match-42"))
    }

    @Test("request headers for a device and for a broadcast channel")
    func requestHeaders() throws {
        let token = try DeviceToken(hex: "a1b2c3")
        let request = APNsRequest(
            destination: .device(token), bundleID: "com.example.owls", priority: .normal,
            expiration: UnixTime(seconds: 1_764_003_600), apnsID: "0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40", payload: [1, 2, 3])
        #expect(request.headers.map { "\($0.name): \($0.value)" } == [
            ":method: POST", ":scheme: https", ":path: /3/device/a1b2c3", "apns-push-type: liveactivity",
            "apns-topic: com.example.owls.push-type.liveactivity", "apns-priority: 5", "apns-expiration: 1764003600",
            "apns-id: 0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40", "content-type: application/json", "content-length: 3",
        ])
        var broadcast = request
        broadcast.destination = .channel("dHN0LXNyY2gtY2hubA==")
        broadcast.expiration = nil
        let names = broadcast.headers.map(\.name)
        #expect(broadcast.path == "/4/broadcasts/apps/com.example.owls")
        #expect(!names.contains("apns-topic"))
        #expect(broadcast.headers.contains { $0 == ("apns-channel-id", "dHN0LXNyY2gtY2hubA==") })
        #expect(broadcast.headers.contains { $0 == ("apns-expiration", "0") })
    }

    @Test("channel management requests: method, path, apns-channel-id and apns-request-id, no push headers")
    func channelManagementRequests() throws {
        func lines(_ operation: ChannelOperation) -> [String] {
            APNsRequest(channelOperation: operation, bundleID: "com.example.owls", requestID: "0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40")
                .headers.map { "\($0.name): \($0.value)" }
        }
        let create = APNsRequest(channelOperation: .create(.mostRecent), bundleID: "com.example.owls", requestID: "r")
        #expect(try JSONValue.parse(create.payload) == ["message-storage-policy": 1, "push-type": "LiveActivity"])
        #expect(lines(.create(.noStorage)) == [
            ":method: POST", ":scheme: https", ":path: /1/apps/com.example.owls/channels",
            "apns-request-id: 0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40", "content-type: application/json", "content-length: 55",
        ])
        #expect(lines(.read(channelID: "Y2g=")) == [
            ":method: GET", ":scheme: https", ":path: /1/apps/com.example.owls/channels", "apns-channel-id: Y2g=",
            "apns-request-id: 0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40",
        ])
        #expect(lines(.delete(channelID: "Y2g="))[0] == ":method: DELETE")
        #expect(lines(.list) == [
            ":method: GET", ":scheme: https", ":path: /1/apps/com.example.owls/all-channels",
            "apns-request-id: 0f4b0c0e-7a0f-4e55-9b8c-2f3c1d2e3f40",
        ])
        #expect(throws: ValueError.self) { try ChannelStoragePolicy(parsing: "2") }
        #expect(try ChannelStoragePolicy(parsing: "most-recent") == .mostRecent)
        #expect(try ChannelStoragePolicy(parsing: "0") == .noStorage)
    }
}
