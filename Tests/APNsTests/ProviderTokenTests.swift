import Crypto
import Foundation
import LiveDispatchCore
import Testing
@testable import APNs

@Suite("Provider token")
struct ProviderTokenTests {
    let key = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "KEY1234567", teamID: "TEAM123456")

    @Test func theTokenIsAnES256JWTThatVerifies() throws {
        let token = try key.providerToken(issuedAt: UnixTime(seconds: 1_764_000_000.7))
        let parts = token.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let header = try JSONValue.parse(try #require(Base64URL.decode(parts[0])))
        let claims = try JSONValue.parse(try #require(Base64URL.decode(parts[1])))
        #expect(header == ["alg": "ES256", "kid": "KEY1234567"])
        #expect(claims == ["iss": "TEAM123456", "iat": 1_764_000_000])
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        #expect(key.privateKey.publicKey.isValidSignature(ecdsa, for: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(!token.contains("="))
    }

    @Test func aPKCS8PEMKeyIsReadAndGarbageIsAConfigurationError() throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        let parsed = try APNsSigningKey(pemRepresentation: pem, keyID: "K", teamID: "T")
        #expect(parsed.keyID == "K")
        #expect(!"\(parsed)".contains("PRIVATE"))
        #expect(throws: APNsError.self) { try APNsSigningKey(pemRepresentation: "not a key", keyID: "K", teamID: "T") }
        do {
            _ = try APNsSigningKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", keyID: "K", teamID: "T")
            Issue.record("a broken key was accepted")
        } catch {
            #expect(error.code == .invalidKey)
            #expect(!error.isRetryable)
        }
    }

    @Test func base64URLRoundTrips() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.encode(Array("{\"alg\":\"ES256\"}".utf8)) == "eyJhbGciOiJFUzI1NiJ9")
    }

    @Test func renewedAtFiftyMinutes() {
        var state = ProviderTokenState()
        let start = UnixTime(seconds: 1_000_000)
        #expect(state.tokenForRequest(now: start) == .sign(issuedAt: start))
        state.signed("t1", issuedAt: start)
        #expect(state.tokenForRequest(now: start + 49 * 60 + 59) == .use("t1"))
        #expect(state.tokenForRequest(now: start + 50 * 60) == .sign(issuedAt: start + 50 * 60))
        state.signed("t2", issuedAt: start + 50 * 60)
        #expect(state.tokenForRequest(now: start + 51 * 60) == .use("t2"))
        #expect(state.renewals == 2)
    }

    @Test func expiredTokenRenewsAtMostOncePerTwentyMinutes() {
        var state = ProviderTokenState()
        let start = UnixTime(seconds: 1_000_000)
        state.signed("t1", issuedAt: start)
        // Too young to be expired: renewing would earn TooManyProviderTokenUpdates.
        #expect(state.expiredReported(token: "t1", now: start + 19 * 60) == .refuse)
        #expect(state.expiredReported(token: "t1", now: start + 20 * 60) == .sign(issuedAt: start + 20 * 60))
        state.signed("t2", issuedAt: start + 20 * 60)
        // Another stream that still carried t1 retries with t2, no new signature.
        #expect(state.expiredReported(token: "t1", now: start + 20 * 60 + 1) == .retry("t2"))
    }

    @Test func aClockGoingBackwardsSignsAgain() {
        var state = ProviderTokenState()
        state.signed("t1", issuedAt: UnixTime(seconds: 2000))
        #expect(state.tokenForRequest(now: UnixTime(seconds: 1000)) == .sign(issuedAt: UnixTime(seconds: 1000)))
    }

    @Test func requestsArrivingOutOfClockOrderKeepTheToken() {
        // Two callers read the clock, then take the lock in the other order.
        var state = ProviderTokenState()
        let issued = UnixTime(seconds: 2000.25)
        state.signed("t1", issuedAt: issued)
        #expect(state.tokenForRequest(now: UnixTime(seconds: 2000.24)) == .use("t1"))
        #expect(state.tokenForRequest(now: issued + -ProviderTokenState.backwardsTolerance) == .use("t1"))
        let stepped = issued + -(ProviderTokenState.backwardsTolerance + 1)
        #expect(state.tokenForRequest(now: stepped) == .sign(issuedAt: stepped))
        #expect(state.renewals == 1)
    }
}
