import Crypto
import Foundation

/// Signs webhook requests the Standard Webhooks way
/// (<https://www.standardwebhooks.com>): `webhook-id`, `webhook-timestamp`
/// (Unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256>` of
/// `{id}.{timestamp}.{body}`, keyed with the secret's base64-decoded part.
public struct WebhookSigner: Sendable {
    /// Why a secret cannot sign. Its message never quotes the secret.
    public struct SecretError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The prefix of a Standard Webhooks secret.
    public static let secretPrefix = "whsec_"

    private let key: SymmetricKey

    /// A signer for `secret`, written `whsec_<base64>`; the HMAC key is the
    /// decoded base64.
    public init(secret: String) throws(SecretError) {
        guard secret.hasPrefix(Self.secretPrefix) else {
            throw SecretError(description: "expected whsec_ followed by the key in base64")
        }
        guard let bytes = Data(base64Encoded: String(secret.dropFirst(Self.secretPrefix.count))) else {
            throw SecretError(description: "the part after whsec_ is not valid base64")
        }
        guard bytes.count >= 16 else {
            throw SecretError(description: "the key is \(bytes.count) bytes; use at least 16 (24 to 64 are usual)")
        }
        key = SymmetricKey(data: bytes)
    }

    /// The value of `webhook-signature` for one message: `v1,` and the
    /// base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }

    /// The three headers of a signed request.
    public func headers(id: String, timestamp: Int64, body: [UInt8]) -> [(String, String)] {
        [("webhook-id", id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", signature(id: id, timestamp: timestamp, body: body))]
    }
}
