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

    @Test("routes and their scopes")
    func scopes() {
        #expect(APIKeyTable.requiredScope(method: .get, path: "/healthz") == nil)
        #expect(APIKeyTable.requiredScope(method: .get, path: "/metrics") == nil)
        #expect(APIKeyTable.requiredScope(method: .get, path: "/v1/openapi.json") == nil)
        #expect(APIKeyTable.requiredScope(method: .post, path: "/v1/activities/a/update") == .ingest)
        #expect(APIKeyTable.requiredScope(method: .post, path: "/v1/tokens") == .ingest)
        #expect(APIKeyTable.requiredScope(method: .delete, path: "/v1/tokens/abcd") == .ingest)
        #expect(APIKeyTable.requiredScope(method: .get, path: "/v1/activities") == .read)
        #expect(APIKeyTable.requiredScope(method: .post, path: "/v1/dead-letters/1/replay") == .admin)
    }

    @Test("the key's hash is looked up and its scopes checked")
    func verdicts() {
        #expect(table.authorize(nil, needs: nil) == .open)
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
        #expect(open.authorize(nil, needs: .read) == .open)
        #expect(open.authorize("Bearer reader-key", needs: .read) == .allowed(key: "viewer"))
        guard case .unauthorized = open.authorize("Bearer wrong", needs: .read), case .unauthorized = open.authorize(nil, needs: .ingest),
              case .unauthorized = open.authorize(nil, needs: .admin), case .unauthorized = table.authorize(nil, needs: .read)
        else {
            Issue.record("only keyless reads on loopback are open")
            return
        }
        for host in ["127.0.0.1", "127.0.0.2", "localhost", "::1"] { #expect(APIKeyTable.isLoopback(host: host), "\(host)") }
        for host in ["0.0.0.0", "10.0.0.1", "", "example.com", "1127.0.0.1"] { #expect(!APIKeyTable.isLoopback(host: host), "\(host)") }
    }
}
