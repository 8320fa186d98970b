import Crypto
import Foundation

/// Provider tokens (ES256 JWTs) made as an APNs client makes them.
enum ProviderTokens {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.sports"

    static func make(key: P256.Signing.PrivateKey, issuedAt: Int64 = Int64(Date().timeIntervalSince1970)) throws
        -> String
    {
        let header = base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        let signature = try key.signature(for: Data("\(header).\(claims)".utf8))
        return "\(header).\(claims).\(base64URL(signature.rawRepresentation))"
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Runs a tool to completion on its own thread, so the wait never holds a
/// thread of the cooperative pool.
func runTool(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:]
) async throws -> ProcessResult {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do {
                continuation.resume(
                    returning: try runProcess(
                        arguments, executable: URL(fileURLWithPath: executable), environment: environment))
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}

/// One `nghttp -v` exchange: the statuses and headers it printed per stream.
struct NghttpExchange: Sendable {
    var output: String
    var errors: String

    /// `:status` per stream id.
    var statuses: [Int32: Int] {
        var result: [Int32: Int] = [:]
        for (stream, name, value) in receivedHeaders where name == ":status" { result[stream] = Int(value) }
        return result
    }

    func header(_ name: String, stream: Int32) -> String? {
        receivedHeaders.first(where: { $0.0 == stream && $0.1 == name })?.2
    }

    /// Lines like `[  0.008] recv (stream_id=13) :status: 200`.
    var receivedHeaders: [(Int32, String, String)] {
        output.split(separator: "\n").compactMap { line -> (Int32, String, String)? in
            guard let start = line.range(of: "recv (stream_id=") else { return nil }
            let rest = line[start.upperBound...]
            guard let close = rest.firstIndex(of: ")"), let stream = Int32(rest[..<close]) else { return nil }
            let field = rest[rest.index(after: close)...].drop(while: { $0 == " " })
            let nameEnd = field.dropFirst().firstIndex(of: ":") ?? field.endIndex
            guard nameEnd < field.endIndex else { return nil }
            let name = String(field[..<nameEnd])
            let value = String(field[field.index(after: nameEnd)...].drop(while: { $0 == " " }))
            return (stream, name, value)
        }
    }

    var certificateAccepted: Bool { !output.contains("Certificate verification failed") && !errors.contains("Certificate verification failed") }
}

/// Sends one request (or `multiply` copies at once) with `nghttp -v`,
/// trusting `certificateFile` through OpenSSL's `SSL_CERT_FILE`.
func nghttp(
    port: Int, path: String, headers: [(String, String)], body: String?, certificateFile: URL, directory: URL,
    multiply: Int = 1
) async throws -> NghttpExchange {
    var arguments = ["-v"]
    if multiply > 1 { arguments += ["-m", String(multiply)] }
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if let body {
        let file = directory.appendingPathComponent("body-\(UUID().uuidString.prefix(8)).json")
        try body.write(to: file, atomically: true, encoding: .utf8)
        arguments += ["-d", file.path]
    }
    arguments.append("https://127.0.0.1:\(port)\(path)")
    let result = try await runTool("/usr/bin/nghttp", arguments, environment: ["SSL_CERT_FILE": certificateFile.path])
    return NghttpExchange(output: result.standardOutput, errors: result.standardError)
}
