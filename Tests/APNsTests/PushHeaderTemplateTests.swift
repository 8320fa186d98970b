import LiveDispatchCore
import Testing

@testable import APNs

@Suite("HTTP/2 push header template")
struct PushHeaderTemplateTests {
    static let authority = "api.push.apple.com"
    static let jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzY0MDAwMDAwfQ.c2ln"

    static func device(_ hex: String = "00ff10ab" + String(repeating: "7e", count: 28)) throws -> APNsRequest.Destination {
        .device(try DeviceToken(hex: hex))
    }

    static func request(
        _ destination: APNsRequest.Destination, bundleID: String = "com.example.app", pushType: String = "liveactivity",
        priority: PushPriority = .immediate, expiration: UnixTime? = nil, id: Int = 1, payloadBytes: Int = 2
    ) -> APNsRequest {
        let suffix = String(id, radix: 16)
        let apnsID = "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - suffix.count) + suffix
        return APNsRequest(
            destination: destination, bundleID: bundleID, pushType: pushType, priority: priority,
            expiration: expiration, apnsID: apnsID, payload: Array(repeating: UInt8(ascii: "x"), count: payloadBytes))
    }

    /// The headers of `request` through `templates`, as `name: value` lines.
    static func lines(
        _ request: APNsRequest, _ templates: inout HTTP2PushHeaderTemplates, token: String = jwt
    ) -> [String]? {
        templates.withHeaders(of: request, token: token, authority: authority) { template in
            template.headers.map { "\($0.name): \($0.value)" }
        }
    }

    /// What the general block (from `APNsRequest.headers`) sends for `request`.
    static func expected(_ request: APNsRequest, token: String = jwt) -> [String] {
        HTTP2HeaderBlock(request, token: token, authority: authority).headers.map { "\($0.name): \($0.value)" }
    }

    @Test func anUpdateToADeviceHasExactlyTheseFields() throws {
        var templates = HTTP2PushHeaderTemplates()
        let update = Self.request(
            try Self.device(), priority: .normal, expiration: UnixTime(seconds: 1_764_028_800.7), id: 0xab,
            payloadBytes: 256)
        #expect(
            Self.lines(update, &templates) == [
                ":method: POST",
                ":scheme: https",
                ":path: /3/device/00ff10ab" + String(repeating: "7e", count: 28),
                ":authority: api.push.apple.com",
                "apns-push-type: liveactivity",
                "apns-topic: com.example.app.push-type.liveactivity",
                "apns-priority: 5",
                "apns-expiration: 1764028800",
                "apns-id: 00000000-0000-4000-8000-0000000000ab",
                "content-type: application/json",
                "content-length: 256",
                "authorization: bearer \(Self.jwt)",
            ])
    }

    @Test func startUpdateEndAndBroadcastMatchTheRequestHeaders() throws {
        var templates = HTTP2PushHeaderTemplates()
        let requests = [
            // start: immediate, expires at its stale date
            Self.request(try Self.device(), priority: .immediate, expiration: UnixTime(seconds: 1_764_000_000), id: 1),
            // update without an expiration: 0
            Self.request(try Self.device(), priority: .normal, expiration: nil, id: 2, payloadBytes: 4096),
            // end: kept for hours
            Self.request(try Self.device(), priority: .immediate, expiration: UnixTime(seconds: 1_764_014_400), id: 3),
            // another push type has the bundle id as its topic
            Self.request(try Self.device(), pushType: "alert", priority: .low, id: 4, payloadBytes: 0),
            // broadcast: channel id instead of a topic, the path of the app
            Self.request(.channel("dHN0LXNpbQ=="), bundleID: "com.example.sports", priority: .low, id: 5),
            Self.request(
                .channel("Y2hhbm5lbC0y"), bundleID: "com.example.sports", priority: .immediate,
                expiration: UnixTime(seconds: 0), id: 6),
        ]
        for request in requests {
            #expect(Self.lines(request, &templates) == Self.expected(request), "\(request.destination)")
        }
        let broadcast = try #require(Self.lines(requests[4], &templates))
        #expect(broadcast.contains(":path: /4/broadcasts/apps/com.example.sports"))
        #expect(broadcast.contains("apns-channel-id: dHN0LXNpbQ=="))
        #expect(!broadcast.contains { $0.hasPrefix("apns-topic") })
    }

    @Test func theApnsIDAndADevicePathAreNeverIndexed() throws {
        var templates = HTTP2PushHeaderTemplates()
        let device = templates.withHeaders(of: Self.request(try Self.device()), token: Self.jwt, authority: Self.authority) {
            $0.headers.filter { !$0.indexed }.map(\.name)
        }
        #expect(device == [":path", "apns-id"])
        // A broadcast's path is the same for every push of the app: indexed.
        let broadcast = templates.withHeaders(of: Self.request(.channel("Y2g=")), token: Self.jwt, authority: Self.authority) {
            $0.headers.filter { !$0.indexed }.map(\.name)
        }
        #expect(broadcast == ["apns-id"])
    }

    @Test func aPushLeavesNothingOfThePreviousOneInTheReusedBuffers() throws {
        var templates = HTTP2PushHeaderTemplates()
        // Each field changes between consecutive pushes, and shrinks as often
        // as it grows: a longer token then a shorter one, an expiration then
        // none, a large payload then a small one, a channel then a device.
        let requests = [
            Self.request(
                try Self.device(String(repeating: "ab", count: 100)), priority: .immediate,
                expiration: UnixTime(seconds: 4_000_000_000), id: 0xffff_ffff_ffff, payloadBytes: 100_000),
            Self.request(try Self.device("0123"), priority: .low, expiration: nil, id: 7, payloadBytes: 0),
            Self.request(.channel("bG9uZy1jaGFubmVsLWlkLW9mLWEtYnJvYWRjYXN0"), priority: .normal, id: 8),
            Self.request(.channel("YQ=="), priority: .immediate, expiration: UnixTime(seconds: 9), id: 9),
            Self.request(try Self.device(), priority: .normal, expiration: UnixTime(seconds: 1_764_000_000), id: 10),
            Self.request(try Self.device("0123"), priority: .immediate, id: 11, payloadBytes: 1),
        ]
        for request in requests {
            #expect(Self.lines(request, &templates) == Self.expected(request), "\(request.apnsID)")
        }
        #expect(templates.count == 2)  // one per kind of the one app
    }

    @Test func aNewProviderTokenReplacesTheTemplateOfItsApp() throws {
        var templates = HTTP2PushHeaderTemplates()
        let push = Self.request(try Self.device())
        #expect(Self.lines(push, &templates, token: "old.token.a") == Self.expected(push, token: "old.token.a"))
        #expect(Self.lines(push, &templates, token: "new.token.b") == Self.expected(push, token: "new.token.b"))
        #expect(templates.count == 1)
    }

    @Test func aFewAppsShareAConnectionWithoutMixingTheirFields() throws {
        var templates = HTTP2PushHeaderTemplates()
        let apps = (0..<(HTTP2PushHeaderTemplates.capacity + 2)).map { "com.example.app\($0)" }
        for round in 0..<3 {
            for (index, app) in apps.enumerated() {
                let push = Self.request(try Self.device(), bundleID: app, id: round * 100 + index)
                #expect(Self.lines(push, &templates) == Self.expected(push))
            }
        }
        #expect(templates.count == HTTP2PushHeaderTemplates.capacity)
    }

    @Test func channelManagementHasNoTemplate() {
        var templates = HTTP2PushHeaderTemplates()
        let list = APNsRequest(channelOperation: .list, bundleID: "com.example.app", requestID: "r-1")
        #expect(Self.lines(list, &templates) == nil)
        #expect(templates.count == 0)
    }
}
