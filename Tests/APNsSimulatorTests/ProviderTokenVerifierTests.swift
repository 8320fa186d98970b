import Crypto
import Testing

@testable import APNsSimulator

@Suite("Provider token verification")
struct ProviderTokenVerifierTests {
    let key = P256.Signing.PrivateKey()
    var verifier: ProviderTokenVerifier {
        ProviderTokenVerifier(teamID: TestProviderToken.teamID, keyID: TestProviderToken.keyID, publicKey: key.publicKey)
    }

    @Test("a fresh token signed by the configured key is valid")
    func valid() throws {
        let token = try TestProviderToken.make(key: key, issuedAt: 1_764_000_000)
        #expect(verifier.verify(authorization: "bearer \(token)", now: 1_764_000_100) == .valid(issuedAt: 1_764_000_000))
    }

    @Test("a token older than an hour is expired")
    func expired() throws {
        let token = try TestProviderToken.make(key: key, issuedAt: 1_764_000_000)
        #expect(verifier.verify(token: token, now: 1_764_000_000 + 3600) == .valid(issuedAt: 1_764_000_000))
        let outcome = verifier.verify(token: token, now: 1_764_000_000 + 3601)
        #expect(outcome == .expired(issuedAt: 1_764_000_000))
        #expect(outcome.reason == "ExpiredProviderToken")
    }

    @Test("a token signed by another key is invalid")
    func badSignature() throws {
        let token = try TestProviderToken.make(key: P256.Signing.PrivateKey(), issuedAt: 1_764_000_000)
        #expect(verifier.verify(token: token, now: 1_764_000_010).reason == "InvalidProviderToken")
    }

    @Test("a token whose claims were changed after signing is invalid")
    func tampered() throws {
        let token = try TestProviderToken.make(key: key, issuedAt: 1_764_000_000)
        let parts = token.split(separator: ".").map(String.init)
        let claims = TestProviderToken.base64URL(.init(#"{"iss":"TEAM123456","iat":1764000500}"#.utf8))
        #expect(verifier.verify(token: "\(parts[0]).\(claims).\(parts[2])", now: 1_764_000_600).reason == "InvalidProviderToken")
    }

    @Test("wrong key id, team, algorithm or shape is invalid", arguments: [
        ("OTHERKEYID", TestProviderToken.teamID, "ES256"),
        (TestProviderToken.keyID, "OTHERTEAM1", "ES256"),
        (TestProviderToken.keyID, TestProviderToken.teamID, "HS256"),
    ])
    func wrongClaims(keyID: String, teamID: String, algorithm: String) throws {
        let token = try TestProviderToken.make(
            key: key, keyID: keyID, teamID: teamID, issuedAt: 1_764_000_000, algorithm: algorithm)
        #expect(verifier.verify(token: token, now: 1_764_000_010).reason == "InvalidProviderToken")
    }

    @Test("a missing or non-bearer authorization is refused")
    func missing() throws {
        #expect(verifier.verify(authorization: nil, now: 0) == .missing)
        #expect(verifier.verify(authorization: "", now: 0).reason == "MissingProviderToken")
        #expect(verifier.verify(authorization: "basic abc", now: 0).reason == "InvalidProviderToken")
        #expect(verifier.verify(authorization: "bearer a.b", now: 0).reason == "InvalidProviderToken")
        #expect(verifier.verify(authorization: "bearer !!.??.**", now: 0).reason == "InvalidProviderToken")
    }

    @Test("a token issued well in the future is invalid")
    func future() throws {
        let token = try TestProviderToken.make(key: key, issuedAt: 1_764_010_000)
        #expect(verifier.verify(token: token, now: 1_764_000_000).reason == "InvalidProviderToken")
    }

    @Test("tokens from the signer verify")
    func signer() throws {
        let token = try ProviderTokenSigner.token(
            key: key, keyID: TestProviderToken.keyID, teamID: TestProviderToken.teamID, issuedAt: 1_764_000_000)
        #expect(verifier.verify(token: token, now: 1_764_000_001) == .valid(issuedAt: 1_764_000_000))
    }
}
