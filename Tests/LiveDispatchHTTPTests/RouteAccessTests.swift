import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import LiveDispatchHTTP
import LiveDispatchCore
import LiveDispatchWorker
import NIOCore
import LiveDispatchTesting
import Testing

/// Who may call which route, tested against the real router in process:
/// every route declares its access where it is registered, and no spelling
/// of a path reaches a handler without the key its route needs.
@Suite("Route access")
struct RouteAccessTests {
    /// The routes anyone may call: health, metrics, status, the console's files, the OpenAPI document.
    static let openRoutes: Set<String> = [
        "GET /healthz", "GET /readyz", "GET /metrics", "GET /status", "GET /", "GET /console/console.css",
        "GET /console/console.js", "GET /favicon.ico", "GET /v1/openapi.json",
    ]

    @Test("every registered route is either deliberately open or needs a key with the scope openapi.yaml gives it")
    func everyRouteDeclaresItsAccess() throws {
        let server = try InProcessServer()
        let open = Set(server.routes.filter { $0.access == .open }.map { "\($0.method.rawValue) \($0.path)" })
        #expect(open == Self.openRoutes)
        let guarded = server.routes.filter { $0.access != .open }
        // Every operation of the document, each with the scope it declares.
        let expected: [String: RouteAccess] = [
            "POST /v1/activities/{activity_id}/start": .key(.ingest), "POST /v1/activities/{activity_id}/update": .key(.ingest),
            "POST /v1/activities/{activity_id}/end": .key(.ingest), "POST /v1/tokens": .key(.ingest),
            "POST /messages/live_activity/update": .key(.ingest), "POST /messages/live_activity/start": .key(.ingest),
            "DELETE /v1/tokens/{token}": .key(.ingest), "GET /v1/activities": .key(.read), "GET /v1/activities/{activity_id}": .key(.read),
            "GET /v1/activities/{activity_id}/tokens": .key(.read), "GET /v1/audiences/{audience}": .key(.read), "GET /v1/channels": .key(.read),
            "GET /v1/dead-letters": .key(.read), "POST /v1/rules/diff": .key(.read),
            "POST /v1/dead-letters/{id}/replay": .key(.admin), "POST /v1/rules/explain": .key(.read),
        ]
        #expect(Dictionary(uniqueKeysWithValues: guarded.map { ("\($0.method.rawValue) \($0.path)", $0.access) }) == expected)
    }

    @Test("an operation of the document without a scope stops the server from starting")
    func undeclaredScopeIsRefused() throws {
        let document = #"{"paths":{"/v1/x":{"post":{"operationId":"x"}}}}"#
        #expect(throws: UndeclaredRouteAccess.self) { try GuardedRouter.declaredScopes(document) }
        let unknown = #"{"paths":{"/v1/x":{"post":{"security":[{"bearer":["root"]}]}}}}"#
        #expect(throws: UndeclaredRouteAccess.self) { try GuardedRouter.declaredScopes(unknown) }
    }

    @Test("without a key, no spelling of any guarded route answers 2xx or runs its handler")
    func noSpellingSkipsTheKey() async throws {
        let server = try InProcessServer(openReads: false)
        try await server.application.test(.router) { client in
            for route in server.routes where route.access != .open {
                let path = concretePath(route.path)
                for spelling in [path] + PathSpellings.of(path) {
                    let body = route.method == .post ? ByteBuffer(string: "{}") : nil
                    let headers: HTTPFields = route.method == .post ? [.contentType: "application/json"] : [:]
                    try await client.execute(uri: spelling, method: route.method, headers: headers, body: body) { response in
                        #expect(!(200..<300).contains(response.status.code), "\(route.method) \(spelling) answered \(response.status.code)")
                        #expect(response.status.code != 500, "\(route.method) \(spelling)")
                    }
                }
            }
        }
        #expect(!server.handlersRan, "a handler behind a key ran without one")
    }

    @Test("each route refuses no key (401), an unknown key (401) and a key without its scope (403), and runs with its scope")
    func scopesPerRoute() async throws {
        let server = try InProcessServer()
        try await server.application.test(.router) { client in
            for route in server.routes {
                guard case .key(let scope) = route.access else { continue }
                let path = concretePath(route.path)
                let json: HTTPFields = route.method == .post ? [.contentType: "application/json"] : [:]
                let body = route.method == .post ? ByteBuffer(string: "{}") : nil
                for (headers, status) in [(HTTPFields(), 401), (InProcessServer.bearer("nobody"), 401)] {
                    try await client.execute(uri: path, method: route.method, headers: json + headers, body: body) { response in
                        #expect(response.status.code == status, "\(route) with \(headers)")
                    }
                }
                for other in WorkerConfiguration.APIScope.allCases where other != scope {
                    try await client.execute(uri: path, method: route.method, headers: json + InProcessServer.bearer(InProcessServer.secret(for: other)), body: body) { response in
                        #expect(response.status.code == 403, "\(route) with a \(other) key")
                    }
                }
                try await client.execute(uri: path, method: route.method, headers: json + InProcessServer.bearer(InProcessServer.secret(for: scope)), body: body) { response in
                    let noRoute = response.status == .notFound && String(buffer: response.body).contains("no route")
                    #expect(![401, 403, 415, 500].contains(response.status.code) && !noRoute, "\(route) with its own key answered \(response.status.code)")
                }
            }
        }
    }

    @Test("bound to loopback, a keyless read needs a loopback Host: a rebound DNS name is refused")
    func loopbackHostOnly() async throws {
        let server = try InProcessServer(openReads: true)
        try await server.withListening { port in
            func get(host: String, key: String? = nil) async throws -> Int {
                let authorization = key.map { "Authorization: Bearer \($0)\r\n" } ?? ""
                return try await rawRequest(port: port, "GET /v1/dead-letters HTTP/1.1\r\nHost: \(host)\r\n\(authorization)Connection: close\r\n\r\n").status
            }
            for host in ["localhost", "localhost:9464", "127.0.0.1:9464", "127.1.2.3", "[::1]:9464", "LOCALHOST", "localhost."] {
                let status = try await get(host: host)
                #expect(status == 200, "Host \(host)")
            }
            for host in ["evil.example", "evil.example:9464", "127.evil.example", "127.0.0.1.nip.io", "[::2]", "localhost.evil", "10.0.0.1", "127.0.0.1:x"] {
                let keyless = try await get(host: host)
                #expect(keyless == 401, "Host \(host)")
                // With a key, the Host does not matter.
                let keyed = try await get(host: host, key: "read-key")
                #expect(keyed == 200, "Host \(host) with a key")
            }
        }
    }

    @Test("keyless loopback reads share one rate limit, as a key does")
    func keylessRateLimit() async throws {
        var http = WorkerConfiguration().http
        http.rateLimit = 1
        http.rateBurst = 3
        // The limiter's clock stands still, so no token comes back during the test.
        let now = ContinuousClock.now
        let server = try InProcessServer(openReads: true, http: http, clock: { now })
        try await server.application.test(.router) { client in
            var statuses: [Int] = []
            for _ in 0..<5 {
                try await client.execute(uri: "/v1/dead-letters", method: .get, headers: [:]) { response in
                    statuses.append(Int(response.status.code))
                    if response.status == .tooManyRequests {
                        #expect(String(buffer: response.body).contains("keyless loopback reads share one rate limit"))
                        #expect(response.headers[.retryAfter] != nil)
                    }
                }
            }
            #expect(statuses.prefix(3).allSatisfy { $0 == 200 }, "\(statuses)")
            #expect(statuses.suffix(2).allSatisfy { $0 == 429 }, "\(statuses)")
            // A key has its own limit, untouched by the keyless ones.
            try await client.execute(uri: "/v1/dead-letters", method: .get, headers: InProcessServer.bearer("read-key")) { response in
                #expect(response.status == .ok)
            }
        }
    }

    @Test("a keyless read from another site's page is refused 403; the console's own pages and tools are answered")
    func crossSiteKeyless() async throws {
        let server = try InProcessServer(openReads: true)
        let site = try #require(HTTPField.Name("Sec-Fetch-Site"))
        try await server.application.test(.router) { client in
            let refused: [HTTPFields] = [
                [site: "cross-site"], [.origin: "https://evil.example"],
                [.origin: "null"], [.origin: "http://127.0.0.1.evil.example:9464"],
            ]
            for headers in refused {
                try await client.execute(uri: "/v1/dead-letters", method: .get, headers: headers) { response in
                    #expect(response.status == .forbidden, "\(headers)")
                }
                try await client.execute(uri: "/v1/rules/explain", method: .post, headers: headers + [.contentType: "application/json"], body: ByteBuffer(string: "{}")) { response in
                    #expect(response.status == .forbidden, "explain with \(headers)")
                }
            }
            let answered: [HTTPFields] = [
                [:], [site: "same-origin"], [.origin: "http://127.0.0.1:9464"],
                [.origin: "http://[::1]:9464", site: "same-site"], [.origin: "http://localhost:9464"],
                InProcessServer.bearer("read-key") + [.origin: "https://evil.example", site: "cross-site"],
            ]
            for headers in answered {
                try await client.execute(uri: "/v1/dead-letters", method: .get, headers: headers) { response in
                    #expect(response.status == .ok, "\(headers)")
                }
            }
        }
    }

    @Test("a body must be declared application/json: a form's content types are refused with 415")
    func contentTypeRequired() async throws {
        let server = try InProcessServer(openReads: true)
        let update = ByteBuffer(string: #"{"content_state":{"score":"1-0"}}"#)
        try await server.application.test(.router) { client in
            for type in [nil, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp"] {
                var headers = InProcessServer.bearer("ingest-key")
                if let type { headers[.contentType] = type }
                try await client.execute(uri: "/v1/activities/m/update", method: .post, headers: headers, body: update) { response in
                    #expect(response.status == .unsupportedMediaType, "\(type ?? "no type")")
                }
                // The keyless read that takes a body, too.
                var keyless: HTTPFields = [:]
                if let type { keyless[.contentType] = type }
                try await client.execute(uri: "/v1/rules/explain", method: .post, headers: keyless, body: ByteBuffer(string: "{}")) { response in
                    #expect(response.status == .unsupportedMediaType, "explain with \(type ?? "no type")")
                }
            }
            for type in ["application/json", "application/json; charset=utf-8", "Application/JSON"] {
                try await client.execute(
                    uri: "/v1/activities/m/update", method: .post, headers: InProcessServer.bearer("ingest-key") + [.contentType: type], body: update
                ) { response in
                    #expect(response.status == .accepted, "\(type)")
                }
            }
        }
        #expect(server.producedRecords.count == 3)
    }

    @Test("every answer carries nosniff and no-store; the console keeps its revalidation")
    func responseHeaders() async throws {
        let server = try InProcessServer(openReads: true)
        try await server.application.test(.router) { client in
            for (path, cache) in [("/healthz", "no-store"), ("/v1/activities", "no-store"), ("/nothing", "no-store"), ("//v1/activities", "no-store"), ("/", "no-cache")] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(path)")
                    #expect(response.headers[.cacheControl] == cache, "\(path)")
                }
            }
        }
    }

    @Test("a path that is not canonical is refused with 400 before routing, one that matches nothing is 404")
    func pathRefusals() async throws {
        let server = try InProcessServer(openReads: true)
        try await server.application.test(.router) { client in
            try await client.execute(uri: "//healthz", method: .get) { response in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("invalid-path"))
            }
            try await client.execute(uri: "/v2/activities", method: .get) { response in #expect(response.status == .notFound) }
            try await client.execute(uri: "/v1/activities/a%20b/tokens", method: .get) { response in #expect(response.status != .badRequest) }
        }
    }
}
