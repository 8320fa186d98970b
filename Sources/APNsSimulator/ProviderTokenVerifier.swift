import Crypto
import Foundation
import LiveDispatchCore

/// Verifies APNs provider tokens: ES256 JWTs whose header names the key
/// (`kid`) and whose claims name the team (`iss`) and the issue time (`iat`),
/// signed with the team's `.p8` key. The simulator holds the public half.
public struct ProviderTokenVerifier: Sendable {
    /// What a token is worth, as APNs would answer it.
    public enum Outcome: Sendable, Hashable {
        /// Signed by the configured key for the configured team, and fresh.
        case valid(issuedAt: Int64)
        /// No `authorization: bearer …` header (403 `MissingProviderToken`).
        case missing
        /// Malformed, wrong key id or team, or a bad signature (403 `InvalidProviderToken`).
        case invalid(String)
        /// Issued more than an hour ago (403 `ExpiredProviderToken`).
        case expired(issuedAt: Int64)

        /// The APNs reason for a refusal; nil when valid.
        public var reason: String? {
            switch self {
            case .valid: nil
            case .missing: "MissingProviderToken"
            case .invalid: "InvalidProviderToken"
            case .expired: "ExpiredProviderToken"
            }
        }
    }

    /// How long a token is accepted after its `iat`.
    public static let lifetime: Int64 = 3600
    /// How far in the future an `iat` may lie (clock skew) before the token is refused.
    public static let allowedClockSkew: Int64 = 300

    public let teamID: String
    public let keyID: String
    public let publicKey: P256.Signing.PublicKey

    public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
    }

    /// Checks the value of an `authorization` header at `now` (Unix seconds).
    public func verify(authorization: String?, now: Int64) -> Outcome {
        guard let authorization, !authorization.isEmpty else { return .missing }
        let prefix = "bearer "
        guard authorization.count > prefix.count,
            authorization.prefix(prefix.count).lowercased() == prefix
        else { return .invalid("authorization is not a bearer token") }
        return verify(token: String(authorization.dropFirst(prefix.count)), now: now)
    }

    /// Checks a compact JWT (`header.claims.signature`) at `now` (Unix seconds).
    public func verify(token: String, now: Int64) -> Outcome {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .invalid("a JWT has three dot-separated parts, this one has \(parts.count)") }
        guard let headerBytes = Base64URL.decode(parts[0]),
            let claimsBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2])
        else { return .invalid("a JWT part is not base64url") }
        guard let header = try? JSONValue.parse(headerBytes), let claims = try? JSONValue.parse(claimsBytes) else {
            return .invalid("the JWT header or claims are not JSON")
        }
        guard header["alg"]?.stringValue == "ES256" else { return .invalid("the JWT algorithm is not ES256") }
        guard header["kid"]?.stringValue == keyID else { return .invalid("the JWT key id is not the configured one") }
        guard claims["iss"]?.stringValue == teamID else { return .invalid("the JWT issuer is not the configured team") }
        guard let issuedAt = claims["iat"]?.integerValue else { return .invalid("the JWT has no integer iat claim") }
        guard signatureBytes.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { return .invalid("the JWT signature is not a 64-byte ES256 signature") }
        let signed = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard publicKey.isValidSignature(signature, for: signed) else {
            return .invalid("the JWT signature does not match the configured key")
        }
        if issuedAt > now + Self.allowedClockSkew { return .invalid("the JWT was issued in the future") }
        if now - issuedAt > Self.lifetime { return .expired(issuedAt: issuedAt) }
        return .valid(issuedAt: issuedAt)
    }
}

/// Base64url without padding, as JWTs use it.
enum Base64URL {
    static func decode(_ text: Substring) -> [UInt8]? {
        var standard = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !standard.contains("=") else { return nil }
        while standard.utf8.count % 4 != 0 { standard.append("=") }
        guard let data = Data(base64Encoded: standard) else { return nil }
        return Array(data)
    }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Signs provider tokens the way APNs clients do, so the CLI can hand one
/// to h2load, curl or nghttp for demos and benchmarks.
public enum ProviderTokenSigner {
    /// An ES256 JWT with `kid` = `keyID`, `iss` = `teamID`, `iat` = `issuedAt`.
    public static func token(
        key: P256.Signing.PrivateKey, keyID: String, teamID: String, issuedAt: Int64
    ) throws(SimulatorError) -> String {
        let header = JSONValue.object(["alg": "ES256", "kid": .string(keyID)]).serialized()
        let claims = JSONValue.object(["iss": .string(teamID), "iat": .integer(issuedAt)]).serialized()
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        do {
            let signature = try key.signature(for: Data(signingInput.utf8))
            return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        } catch {
            throw .invalidKey("cannot sign a provider token with the key: \(error)")
        }
    }
}
