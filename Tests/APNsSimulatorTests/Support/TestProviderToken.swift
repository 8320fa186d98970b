import Crypto
import Foundation

/// Makes provider tokens (ES256 JWTs) the way an APNs client does, for tests.
enum TestProviderToken {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.sports"

    static func make(
        key: P256.Signing.PrivateKey, keyID: String = keyID, teamID: String = teamID, issuedAt: Int64,
        algorithm: String = "ES256"
    ) throws -> String {
        let header = base64URL(Data(#"{"alg":"\#(algorithm)","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        let signature = try key.signature(for: Data("\(header).\(claims)".utf8))
        return "\(header).\(claims).\(base64URL(signature.rawRepresentation))"
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }
}
