@testable import LiveDispatchHTTP
import LiveDispatchWorker
import Testing

@Suite("API keys")
struct APIKeyTableTests {
    // SHA-256 of "password" and of "reader-key".
    static let ingestHash = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
    static let readHash = "ec4408df15da46b328f6f3246fa723d0aa6cb0f0a0dd9c4626080ab1b02aa3b2"

    let table = APIKeyTable([
        .init(name: "backend", sha256: ingestHash, scopes: [.ingest]),
        .init(name: "viewer", sha256: readHash, scopes: [.read]),
    ])

    @Test("the key's hash is looked up and its scopes checked")
    func verdicts() {
        #expect(table.authorize("Bearer password", needs: .ingest) == .allowed(key: "backend"))
        #expect(table.authorize("bearer password", needs: .ingest) == .allowed(key: "backend"))
        guard case .forbidden = table.authorize("Bearer password", needs: .read) else {
            Issue.record("an ingest key must not read")
            return
        }
        for header in [nil, "", "Bearer", "Bearer ", "Basic cGFzc3dvcmQ=", "Bearer wrong", "password", "Bearer 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"] {
            guard case .unauthorized = table.authorize(header, needs: .ingest) else {
                Issue.record("\(String(describing: header)) must be refused")
                continue
            }
        }
    }

    @Test("bound to loopback, the read routes need no key; a key given is still checked, and writes still need one")
    func loopbackReads() {
        let open = APIKeyTable([.init(name: "viewer", sha256: Self.readHash, scopes: [.read])], openReads: true)
        #expect(open.authorize(nil, needs: .read, host: "127.0.0.1:9464") == .open)
        guard case .unauthorized = open.authorize(nil, needs: .read, host: "rebound.example:9464"), case .unauthorized = open.authorize(nil, needs: .read) else {
            Issue.record("a keyless read needs a loopback Host")
            return
        }
        #expect(open.authorize("Bearer reader-key", needs: .read) == .allowed(key: "viewer"))
        guard case .unauthorized = open.authorize("Bearer wrong", needs: .read), case .unauthorized = open.authorize(nil, needs: .ingest),
              case .unauthorized = open.authorize(nil, needs: .admin), case .unauthorized = table.authorize(nil, needs: .read)
        else {
            Issue.record("only keyless reads on loopback are open")
            return
        }
        for host in ["127.0.0.1", "127.0.0.2", "127.255.255.254", "localhost", "LocalHost", "localhost.", "::1", "[::1]", "0:0:0:0:0:0:0:1", "[0::1]"] {
            #expect(APIKeyTable.isLoopback(host: host), "\(host)")
        }
        for host in [
            "0.0.0.0", "10.0.0.1", "", "example.com", "1127.0.0.1", "127.example.com", "127.0.0.1.example.com", "127.0.0", "127.0.0.256",
            "127.00000.0.1", "::2", "::", "[::1", "localhost.example", "::ffff:10.0.0.1", "::1\u{0}x",
        ] {
            #expect(!APIKeyTable.isLoopback(host: host), "\(host)")
        }
    }

    @Test("the host of a Host header, with or without its port; malformed ones are nil")
    func hostHeaders() {
        #expect(APIKeyTable.hostName(ofHeader: "localhost:9464") == "localhost")
        #expect(APIKeyTable.hostName(ofHeader: "[::1]:9464") == "[::1]")
        #expect(APIKeyTable.hostName(ofHeader: "[::1]") == "[::1]")
        #expect(APIKeyTable.hostName(ofHeader: "127.0.0.1") == "127.0.0.1")
        for bad in ["", ":80", "a:b:c", "[::1", "[::1]x", "host:port"] { #expect(APIKeyTable.hostName(ofHeader: bad) == nil, "\(bad)") }
    }
}
