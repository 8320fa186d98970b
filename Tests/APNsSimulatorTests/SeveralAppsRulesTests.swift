import Crypto
import Testing

@testable import APNsSimulator

/// A simulator told several apps: each provider token is checked against
/// the key it names, and a push's topic must be a bundle of that key.
@Suite("APNs request rules with several apps")
struct SeveralAppsRulesTests {
    static let now: Int64 = 1_764_000_000
    static let payload = Array(#"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"score":1}}}"#.utf8)

    let scoresKey = P256.Signing.PrivateKey()
    let courierKey = P256.Signing.PrivateKey()
    let sharedKey = P256.Signing.PrivateKey()
    /// One provider token per key, as a client reuses it on a connection.
    let tokens: [String: String]

    init() throws {
        tokens = [
            "KEYSCORES1": try TestProviderToken.make(key: scoresKey, keyID: "KEYSCORES1", teamID: "TEAMSCORES", issuedAt: Self.now),
            "KEYCOURIE1": try TestProviderToken.make(key: courierKey, keyID: "KEYCOURIE1", teamID: "TEAMCOURIE", issuedAt: Self.now),
            "KEYSHARED1": try TestProviderToken.make(key: sharedKey, keyID: "KEYSHARED1", teamID: "TEAMSHARED", issuedAt: Self.now),
        ]
    }

    /// scores (TEAMSCORES/KEYSCORES1), courier (TEAMCOURIE/KEYCOURIE1), and
    /// two apps sharing one key (TEAMSHARED/KEYSHARED1).
    var rules: APNsRequestRules {
        APNsRequestRules(
            bundleID: "com.example.scores",
            verifier: ProviderTokenVerifier(teamID: "TEAMSCORES", keyID: "KEYSCORES1", publicKey: scoresKey.publicKey),
            tokenUpdateInterval: 1200,
            others: [
                ("com.example.courier", ProviderTokenVerifier(teamID: "TEAMCOURIE", keyID: "KEYCOURIE1", publicKey: courierKey.publicKey)),
                ("com.example.news", ProviderTokenVerifier(teamID: "TEAMSHARED", keyID: "KEYSHARED1", publicKey: sharedKey.publicKey)),
                ("com.example.weather", ProviderTokenVerifier(teamID: "TEAMSHARED", keyID: "KEYSHARED1", publicKey: sharedKey.publicKey)),
            ])
    }

    func request(jwt: String?, bundle: String) throws -> ReceivedRequest {
        var request = ReceivedRequest(streamID: 1)
        let jwt = jwt ?? ""
        request.headers = HeaderBlock([
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(String(repeating: "ab", count: 32))"),
            ("authorization", "bearer \(jwt)"), ("apns-push-type", "liveactivity"), ("apns-topic", "\(bundle).push-type.liveactivity"),
            ("apns-priority", "10"),
        ].map { HeaderField(name: $0.0, value: $0.1) })
        request.appendBody(Self.payload)
        return request
    }

    func scores(_ bundle: String = "com.example.scores") throws -> ReceivedRequest {
        try request(jwt: tokens["KEYSCORES1"], bundle: bundle)
    }

    func courier(_ bundle: String = "com.example.courier") throws -> ReceivedRequest {
        try request(jwt: tokens["KEYCOURIE1"], bundle: bundle)
    }

    func shared(_ bundle: String) throws -> ReceivedRequest {
        try request(jwt: tokens["KEYSHARED1"], bundle: bundle)
    }

    /// `200` or the status and reason, e.g. `400 TopicDisallowed`.
    func status(_ request: ReceivedRequest, on state: inout ConnectionTokenState) -> String {
        let verdict = rules.evaluate(request, tokenState: &state, now: Self.now, generatedID: { "generated" })
        return ([String(verdict.response.status)] + (verdict.response.reason.map { [$0] } ?? [])).joined(separator: " ")
    }

    @Test("each app's key pushes its own bundle on a connection of its own")
    func ownKeyOwnBundle() throws {
        var first = ConnectionTokenState()
        #expect(status(try scores(), on: &first) == "200")
        var second = ConnectionTokenState()
        #expect(status(try courier(), on: &second) == "200")
    }

    @Test("a key cannot push another key's bundle")
    func crossedKey() throws {
        var state = ConnectionTokenState()
        #expect(status(try scores("com.example.courier"), on: &state) == "400 DeviceTokenNotForTopic")
        var other = ConnectionTokenState()
        #expect(status(try courier("com.example.scores"), on: &other) == "400 DeviceTokenNotForTopic")
    }

    @Test("a token signed with a wrong key for its key id is refused")
    func wrongSignature() throws {
        var state = ConnectionTokenState()
        let forged = try request(
            jwt: TestProviderToken.make(key: courierKey, keyID: "KEYSCORES1", teamID: "TEAMSCORES", issuedAt: Self.now), bundle: "com.example.scores")
        #expect(status(forged, on: &state) == "403 InvalidProviderToken")
    }

    @Test("a connection stays with the bundle of its first push, even for a key of two bundles")
    func boundBundle() throws {
        var state = ConnectionTokenState()
        #expect(status(try shared("com.example.news"), on: &state) == "200")
        #expect(status(try shared("com.example.weather"), on: &state) == "400 TopicDisallowed")
        #expect(status(try shared("com.example.news"), on: &state) == "200")
        var fresh = ConnectionTokenState()
        #expect(status(try shared("com.example.weather"), on: &fresh) == "200", "a connection of its own may push the other bundle")
    }

    @Test("a connection does not switch to another app's key")
    func unrelatedKey() throws {
        var state = ConnectionTokenState()
        #expect(status(try scores(), on: &state) == "200")
        #expect(status(try courier(), on: &state) == "403 UnrelatedKeyIdInToken")
    }
}
