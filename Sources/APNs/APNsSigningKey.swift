import Crypto
import LiveDispatchCore

/// The provider's token-auth key: the `.p8` key Apple issued, its key id and
/// the team id. Its description never shows the key.
public struct APNsSigningKey: Sendable, CustomStringConvertible {
    /// The 10-character key id (`kid`).
    public var keyID: String
    /// The 10-character team id (`iss`).
    public var teamID: String
    let privateKey: P256.Signing.PrivateKey

    /// Reads a PKCS#8 PEM (`.p8`) key.
    public init(pemRepresentation pem: String, keyID: String, teamID: String) throws(APNsError) {
        guard !keyID.isEmpty, !teamID.isEmpty else {
            throw .invalidKey("the key id and team id must not be empty")
        }
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .invalidKey("not a P-256 PKCS#8 PEM key")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Wraps a key already in memory (tests, benchmarks).
    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    public var description: String { "APNsSigningKey(keyID: \(keyID), teamID: \(teamID))" }

    /// An ES256 JWT: header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`,
    /// signature raw r‖s, all base64url without padding.
    public func providerToken(issuedAt: UnixTime) throws(APNsError) -> String {
        let header: JSONValue = ["alg": "ES256", "kid": .string(keyID)]
        let claims: JSONValue = ["iss": .string(teamID), "iat": .integer(issuedAt.wholeSeconds)]
        let signingInput =
            Base64URL.encode(Array(header.serializedString().utf8)) + "."
            + Base64URL.encode(Array(claims.serializedString().utf8))
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try privateKey.signature(for: Array(signingInput.utf8))
        } catch {
            throw .signingFailed("ECDSA P-256 signing error")
        }
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

/// base64url without padding (RFC 7515).
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { output.append(alphabet[Int(value >> UInt32(shift) & 0x3F)]) } // not from a Double: six bits of a UInt32
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let value = UInt32(bytes[index]) << 16
            for shift in [18, 12] { output.append(alphabet[Int(value >> UInt32(shift) & 0x3F)]) } // not from a Double: six bits of a UInt32
        } else if rest == 2 {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            for shift in [18, 12, 6] { output.append(alphabet[Int(value >> UInt32(shift) & 0x3F)]) } // not from a Double: six bits of a UInt32
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 {
            guard let index = alphabet.firstIndex(of: byte) else { return nil }
            values.append(UInt8(index))
        }
        guard values.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            var value: UInt32 = 0
            for (offset, sextet) in chunk.enumerated() { value |= UInt32(sextet) << UInt32(18 - 6 * offset) }
            let produced = chunk.count - 1
            for offset in 0..<produced { output.append(UInt8(value >> UInt32(16 - 8 * offset) & 0xFF)) }
            index += 4
        }
        return output
    }
}
