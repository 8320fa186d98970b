import LiveDispatchCore
import Testing
@testable import APNs

@Suite("Outcome classification")
struct OutcomeClassificationTests {
    func response(_ status: Int, _ body: String = "", headers: [String: String] = [:]) -> APNsResponse {
        APNsResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    @Test func everyDocumentedReasonRoundTrips() {
        #expect(APNsReason.allKnown.count == 33)
        for reason in APNsReason.allKnown {
            #expect(APNsReason(reason.description) == reason)
            if case .unknown = reason { Issue.record("\(reason) is unknown") }
        }
        #expect(APNsReason("SomethingNew") == .unknown("SomethingNew"))
        #expect(APNsReason("SomethingNew").description == "SomethingNew")
    }

    @Test func successIsDeliveredWithTheEchoedID() {
        #expect(response(200, headers: ["apns-id": "abc"]).outcome(requestAPNsID: "x") == .delivered(apnsID: "abc"))
        #expect(response(200).outcome(requestAPNsID: "x") == .delivered(apnsID: "x"))
    }

    @Test func goneTokensAreInvalidWithTheirTimestamp() {
        let gone = response(410, #"{"reason":"Unregistered","timestamp":1764000000500}"#)
        #expect(gone.outcome(requestAPNsID: "x") == .tokenInvalid(reason: .unregistered, since: UnixTime(seconds: 1_764_000_000.5)))
        let expired = response(410, #"{"reason":"ExpiredToken"}"#)
        #expect(expired.outcome(requestAPNsID: "x") == .tokenInvalid(reason: .expiredToken, since: nil))
        let bad = response(400, #"{"reason":"BadDeviceToken"}"#)
        #expect(bad.outcome(requestAPNsID: "x") == .tokenInvalid(reason: .badDeviceToken, since: nil))
    }

    @Test func otherClientErrorsArePermanent() {
        #expect(response(400, #"{"reason":"BadPriority"}"#).outcome(requestAPNsID: "x") == .permanent(status: 400, reason: .badPriority))
        #expect(response(413, #"{"reason":"PayloadTooLarge"}"#).outcome(requestAPNsID: "x") == .permanent(status: 413, reason: .payloadTooLarge))
        #expect(response(404, "").outcome(requestAPNsID: "x") == .permanent(status: 404, reason: .unknown("HTTP 404")))
        #expect(response(400, "not json").outcome(requestAPNsID: "x") == .permanent(status: 400, reason: .unknown("HTTP 400")))
    }

    @Test func throttlingAndServerErrorsAreRetryableWithRetryAfter() {
        let outcome = response(429, #"{"reason":"TooManyRequests"}"#, headers: ["retry-after": "12"]).outcome(requestAPNsID: "x")
        guard case .retryable(let failure) = outcome else {
            Issue.record("expected retryable, got \(outcome)")
            return
        }
        #expect(failure.status == 429)
        #expect(failure.reason == .tooManyRequests)
        #expect(failure.retryAfter == 12)
        // A retry-after that is not a sane number of seconds is ignored or capped, never an eternity.
        for (header, expected) in [("1e300", 3600.0), ("inf", nil), ("nan", nil), ("-5", nil), ("soon", nil), ("7200", 3600)] as [(String, Double?)] {
            guard case .retryable(let failure) = response(429, "", headers: ["retry-after": header]).outcome(requestAPNsID: "x") else {
                Issue.record("429 with retry-after \(header) is not retryable")
                continue
            }
            #expect(failure.retryAfter == expected, "retry-after: \(header)")
        }
        #expect(failure.error.isRetryable)
        for status in [500, 503] {
            guard case .retryable(let failure) = response(status, #"{"reason":"ServiceUnavailable"}"#).outcome(requestAPNsID: "x") else {
                Issue.record("\(status) is not retryable")
                continue
            }
            #expect(failure.retryAfter == nil)
        }
    }

    @Test func providerTokenAndTopicErrorsAreConfigurationErrors() {
        for reason in ["InvalidProviderToken", "MissingProviderToken", "BadEnvironmentKeyInToken", "Forbidden"] {
            let outcome = response(403, #"{"reason":"\#(reason)"}"#).outcome(requestAPNsID: "x")
            guard case .misconfigured(let error) = outcome else {
                Issue.record("\(reason) gave \(outcome)")
                continue
            }
            #expect(error.code == .providerTokenRejected)
            #expect(!error.isRetryable)
        }
        guard case .misconfigured(let error) = response(400, #"{"reason":"TopicDisallowed"}"#).outcome(requestAPNsID: "x") else {
            Issue.record("TopicDisallowed is not a configuration error")
            return
        }
        #expect(error.code == .pushRejectedForConfiguration)
    }

    @Test func shutdownAndUnrelatedKeyAskForAnotherConnection() {
        #expect(response(503, #"{"reason":"Shutdown"}"#).asksForAnotherConnection)
        #expect(response(403, #"{"reason":"UnrelatedKeyIdInToken"}"#).asksForAnotherConnection)
        #expect(!response(503, #"{"reason":"ServiceUnavailable"}"#).asksForAnotherConnection)
        #expect(!response(403, #"{"reason":"InvalidProviderToken"}"#).asksForAnotherConnection)
        #expect(!response(200).asksForAnotherConnection)
    }
}

@Suite("HTTP/2 header block")
struct HTTP2HeaderBlockTests {
    @Test func authorityFollowsThePseudoHeaders() throws {
        let request = APNsRequest(
            destination: .device(try DeviceToken(hex: "abcd")), bundleID: "com.example.app", priority: .immediate,
            expiration: nil, apnsID: "00000000-0000-0000-0000-000000000001", payload: Array("{}".utf8))
        let block = HTTP2HeaderBlock(request.headers, authority: "api.push.apple.com")
        let names = block.headers.map(\.name)
        #expect(names.prefix(4) == [":method", ":scheme", ":path", ":authority"])
        #expect(block.headers[3].value == "api.push.apple.com")
        #expect(block.headers.count == request.headers.count + 1)
        #expect(block.headers.first { $0.name == ":path" }?.value == "/3/device/abcd")
        #expect(HTTP2HeaderBlock([(":method", "GET")], authority: "h").headers.map(\.name) == [":method", ":authority"])
    }
}

