import Crypto
import Foundation

/// The TLS identity the simulator serves: a certificate and its P-256
/// private key, both PEM. Clients trust `certificatePEM` as a root; other
/// servers (nghttpd in tests) can reuse the pair.
public struct SimulatorCertificate: Sendable, Hashable {
    public let certificatePEM: String
    public let privateKeyPEM: String

    /// Uses a pair read from files or made elsewhere.
    public init(certificatePEM: String, privateKeyPEM: String) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// A fresh self-signed X.509 v3 certificate for `localhost` and
    /// `127.0.0.1`, valid from a day before `now` for a year, signed with a
    /// new P-256 key (ecdsa-with-SHA256). It is its own CA, so it can be
    /// given to a client as the only trust root.
    public static func generate(
        commonName: String = "LiveDispatch APNs Simulator", now: Date = Date()
    ) throws(SimulatorError) -> SimulatorCertificate {
        let key = P256.Signing.PrivateKey()
        let publicKeyInfo = [UInt8](key.publicKey.derRepresentation)
        let serial = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let tbs = SelfSignedCertificateDER.toBeSigned(
            serial: serial, commonName: commonName, notBefore: now.addingTimeInterval(-86_400),
            notAfter: now.addingTimeInterval(365 * 86_400), subjectPublicKeyInfo: publicKeyInfo,
            // "127.0.0.1" also as a DNS name: some clients match an IP host against DNS names only.
            dnsNames: ["localhost", "127.0.0.1"], ipAddresses: [[127, 0, 0, 1]])
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.signature(for: Data(tbs))
        } catch {
            throw .invalidCertificate("could not sign the simulator certificate: \(error)")
        }
        let certificate = SelfSignedCertificateDER.certificate(
            toBeSigned: tbs, signatureDER: [UInt8](signature.derRepresentation))
        return SimulatorCertificate(
            certificatePEM: PEM.encode(certificate, label: "CERTIFICATE"), privateKeyPEM: key.pemRepresentation)
    }
}

/// PEM armour.
enum PEM {
    static func encode(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines: [String] = ["-----BEGIN \(label)-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The DER of a self-signed X.509 v3 certificate: just the pieces needed
/// (INTEGER, OID, names, times, extensions), no general ASN.1.
enum SelfSignedCertificateDER {
    static let ecdsaWithSHA256: [UInt64] = [1, 2, 840, 10045, 4, 3, 2]
    static let commonNameOID: [UInt64] = [2, 5, 4, 3]
    static let subjectKeyIdentifierOID: [UInt64] = [2, 5, 29, 14]
    static let basicConstraintsOID: [UInt64] = [2, 5, 29, 19]
    static let subjectAltNameOID: [UInt64] = [2, 5, 29, 17]
    static let extendedKeyUsageOID: [UInt64] = [2, 5, 29, 37]
    static let serverAuthOID: [UInt64] = [1, 3, 6, 1, 5, 5, 7, 3, 1]

    static func toBeSigned(
        serial: [UInt8], commonName: String, notBefore: Date, notAfter: Date, subjectPublicKeyInfo: [UInt8],
        dnsNames: [String], ipAddresses: [[UInt8]]
    ) -> [UInt8] {
        let name = sequence(set(sequence(oid(commonNameOID) + tlv(0x0C, Array(commonName.utf8)))))
        let algorithm = sequence(oid(ecdsaWithSHA256))
        let validity = sequence(time(notBefore) + time(notAfter))
        // The key identifier is the SHA-1 of the public key bits (RFC 5280, 4.2.1.2).
        let keyBits = Array(subjectPublicKeyInfo.suffix(65))
        let keyIdentifier = Array(Insecure.SHA1.hash(data: keyBits))
        var alternativeNames: [UInt8] = []
        for dns in dnsNames { alternativeNames += tlv(0x82, Array(dns.utf8)) }
        for ip in ipAddresses { alternativeNames += tlv(0x87, ip) }
        let extensions =
            `extension`(subjectKeyIdentifierOID, critical: false, value: tlv(0x04, keyIdentifier))
            + `extension`(basicConstraintsOID, critical: true, value: sequence(tlv(0x01, [0xFF])))
            + `extension`(subjectAltNameOID, critical: false, value: sequence(alternativeNames))
            + `extension`(extendedKeyUsageOID, critical: false, value: sequence(oid(serverAuthOID)))
        return sequence(
            tlv(0xA0, integer([2]))  // version v3
                + integer(serial) + algorithm + name + validity + name + subjectPublicKeyInfo
                + tlv(0xA3, sequence(extensions)))
    }

    static func certificate(toBeSigned: [UInt8], signatureDER: [UInt8]) -> [UInt8] {
        sequence(toBeSigned + sequence(oid(ecdsaWithSHA256)) + tlv(0x03, [0x00] + signatureDER))
    }

    static func `extension`(_ identifier: [UInt64], critical: Bool, value: [UInt8]) -> [UInt8] {
        sequence(oid(identifier) + (critical ? tlv(0x01, [0xFF]) : []) + tlv(0x04, value))
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
    static func sequence(_ content: [UInt8]) -> [UInt8] { tlv(0x30, content) }
    static func set(_ content: [UInt8]) -> [UInt8] { tlv(0x31, content) }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// A non-negative INTEGER from big-endian magnitude bytes.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop(while: { $0 == 0 }))
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func oid(_ arcs: [UInt64]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7F)]
            var remaining = arc >> 7
            while remaining > 0 {
                chunk.insert(UInt8(remaining & 0x7F) | 0x80, at: 0)
                remaining >>= 7
            }
            bytes += chunk
        }
        return tlv(0x06, bytes)
    }

    /// UTCTime before 2050, GeneralizedTime from then on (RFC 5280, 4.1.2.5).
    static func time(_ date: Date) -> [UInt8] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let year = parts.year ?? 1970
        func two(_ value: Int?) -> String {
            let value = value ?? 0
            return value < 10 ? "0\(value)" : "\(value)"
        }
        let rest = two(parts.month) + two(parts.day) + two(parts.hour) + two(parts.minute) + two(parts.second) + "Z"
        if year < 2050 {
            return tlv(0x17, Array((two(year % 100) + rest).utf8))
        }
        return tlv(0x18, Array((String(year) + rest).utf8))
    }
}
