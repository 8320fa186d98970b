import LiveDispatchWorker
import Testing

@Suite("HTTP configuration")
struct HTTPConfigurationTests {
    @Test("limits and API keys are read; keys are kept as hashes with their scopes")
    func values() throws {
        let configuration = try WorkerConfiguration.parse(yaml: """
            http:
              idle_timeout: 5s
              header_timeout: 2s
              max_connections: 64
              max_body_bytes: 4096
              rate_limit: 10
              rate_burst: 20
              api_keys:
                - name: backend
                  sha256: 5E884898DA28047151D0E56F8DC6292773603D0D6AABBDD62A11EF721D1542D8
                  scopes: [ingest, read]
            """, file: "test.yaml")
        #expect(configuration.http.idleTimeout == 5)
        #expect(configuration.http.headerTimeout == 2)
        #expect(configuration.http.maxConnections == 64)
        #expect(configuration.http.maxBodyBytes == 4096)
        #expect(configuration.http.rateLimit == 10 && configuration.http.rateBurst == 20)
        #expect(configuration.http.apiKeys == [
            .init(name: "backend", sha256: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", scopes: [.ingest, .read]),
        ])
    }

    @Test("bad keys are reported at file:line:column, without echoing the file")
    func badKeys() {
        let yaml = """
            http:
              api_keys:
                - name: backend
                  sha256: not-a-hash
                  scopes: [ingest]
                - name: other
                  sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
                  scopes: [ingest, write]
                - name: third
                  scopes: [read]
                - name: backend
                  sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
                  scopes: [read]
                  colour: blue
              idle_timeout: 0s
            """
        #expect(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: yaml, file: "bad.yaml") }
        do {
            _ = try WorkerConfiguration.parse(yaml: yaml, file: "bad.yaml")
        } catch {
            let locations = error.problems.map(\.location)
            #expect(locations.contains { $0.hasPrefix("bad.yaml:4:") }, "sha256 of the first key: \(error)")
            #expect(locations.contains { $0.hasPrefix("bad.yaml:8:") }, "the unknown scope: \(error)")
            #expect(error.problems.contains { $0.message.contains("no sha256") }, "the key without a hash: \(error)")
            #expect(error.problems.contains { $0.message.contains("colour") }, "the unknown field: \(error)")
            #expect(error.problems.contains { $0.key == "http.idle_timeout" }, "a zero timeout: \(error)")
            #expect(error.problems.allSatisfy { $0.location.hasPrefix("bad.yaml:") }, "every problem has a position: \(error)")
            #expect(!error.description.contains("not-a-hash"), "the file's contents are not echoed: \(error)")
        }
    }

    @Test("api keys cannot come from the environment")
    func environment() {
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.parse(yaml: "", file: "x.yaml", environment: ["LIVEDISPATCH_HTTP_API_KEYS": "backend"])
        }
    }
}
