import NIOHTTP1
import Testing

@testable import LiveDispatchWorker

@Suite("Webhook signing")
struct WebhookSignerTests {
    @Test("the signature matches the Standard Webhooks specification's published vector")
    func specificationVector() throws {
        let signer = try WebhookSigner(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let body = Array(#"{"test": 2432232314}"#.utf8)
        #expect(signer.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body)
            == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let headers = signer.headers(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body)
        #expect(headers.map(\.0) == ["webhook-id", "webhook-timestamp", "webhook-signature"])
        #expect(headers[1].1 == "1614265330")
        // Another id, time or body signs differently.
        #expect(signer.signature(id: "msg_other", timestamp: 1_614_265_330, body: body) != headers[2].1)
        #expect(signer.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_331, body: body) != headers[2].1)
        #expect(signer.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body + [0x20]) != headers[2].1)
    }

    @Test("a secret without whsec_, with bad base64 or too short a key is refused without quoting it",
          arguments: ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ=", "whsec_"])
    func badSecrets(_ secret: String) {
        do {
            _ = try WebhookSigner(secret: secret)
            Issue.record("\(secret) was accepted")
        } catch {
            #expect(!error.description.contains(secret.dropFirst(6)) || secret.count <= 6)
        }
    }

    @Test("Retry-After is read as whole seconds; a date or garbage is not")
    func retryAfter() {
        func headers(_ value: String) -> HTTPHeaders { HTTPHeaders([("Retry-After", value)]) }
        #expect(WebhookSender.retryAfter(headers("120")) == 120)
        #expect(WebhookSender.retryAfter(headers(" 3 ")) == 3)
        #expect(WebhookSender.retryAfter(headers("Wed, 21 Oct 2015 07:28:00 GMT")) == nil)
        #expect(WebhookSender.retryAfter(headers("-1")) == nil)
        #expect(WebhookSender.retryAfter(headers("99999999999999999999")) == nil)
        #expect(WebhookSender.retryAfter(HTTPHeaders()) == nil)
    }
}
