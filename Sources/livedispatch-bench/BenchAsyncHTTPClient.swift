import APNs
import AsyncHTTPClient
import Foundation
import LiveDispatchCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The ecosystem's HTTP client sending what `bench apns` sends: the yardstick
/// for the APNs pool against the library it would otherwise be.
///
/// One `HTTPClient` per connection (a client keeps one HTTP/2 connection per
/// host and queues requests past the server's stream limit), on the same
/// event loops as the pool; the requests carry the pool's headers, from
/// ``APNsRequest/headers``, with a provider token of the same key, and the
/// same payload, over HTTP/2 and TLS.
struct AsyncHTTPClientComparison {
    let clients: [HTTPClient]
    let url: String
    let authorization: String
    let bundleID: String
    let token: DeviceToken
    let payload: ByteBuffer
    let timeout: TimeAmount

    init(
        endpoint: APNsClientConfiguration.Endpoint, connections: Int, trustRoots: [NIOSSLCertificate], insecure: Bool,
        token: DeviceToken, bundleID: String, payload: [UInt8], authorization: String, timeout: Double
    ) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if !trustRoots.isEmpty { tls.additionalTrustRoots = [.certificates(trustRoots)] }
        if insecure { tls.certificateVerification = .none }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        configuration.redirectConfiguration = .disallow
        // The certificate is checked against the server name, as the pool does;
        // the connection goes to the endpoint's host.
        if endpoint.serverName != endpoint.host { configuration.dnsOverride = [endpoint.serverName: endpoint.host] }
        clients = (0..<connections).map { _ in
            HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: configuration)
        }
        url = "https://\(endpoint.serverName):\(endpoint.port)"
        self.authorization = authorization
        self.bundleID = bundleID
        self.token = token
        self.payload = ByteBuffer(bytes: payload)
        self.timeout = .nanoseconds(Int64((min(max(timeout, 0.001), 86_400) * 1e9).rounded()))
    }

    /// The request the pool would send for one push, with a new `apns-id`.
    func request() -> HTTPClientRequest {
        let push = BenchAPNsCommand.request(token, bundleID: bundleID, payload: [])
        var request = HTTPClientRequest(url: url + push.path)
        request.method = .POST
        for (name, value) in push.headers where !name.hasPrefix(":") && name != "content-length" {
            request.headers.add(name: name, value: value)
        }
        request.headers.add(name: "authorization", value: authorization)
        // AsyncHTTPClient writes the content-length of a body of known length.
        request.body = .bytes(payload)
        return request
    }

    /// One push per client, each answered 200 over HTTP/2: the connections are open.
    func warmUp() async throws {
        for client in clients {
            let response = try await client.execute(request(), timeout: timeout)
            _ = try await response.body.collect(upTo: 1 << 16)
            guard response.status == .ok else { throw BenchError(description: "AsyncHTTPClient's warm-up push was answered \(response.status)") }
            guard response.version == .http2 else {
                throw BenchError(description: "AsyncHTTPClient's warm-up push went over \(response.version), not HTTP/2")
            }
        }
    }

    /// `requests` pushes from `senders` tasks, spread over the clients.
    func measure(requests total: Int, senders: Int) async -> BenchAPNsCommand.Measurement {
        let next = Ticket(limit: total)
        let started = ContinuousClock.now
        let results = await withTaskGroup(of: ([Int64], [String: Int]).self) { group in
            for sender in 0..<senders {
                let client = clients[sender % clients.count]
                group.addTask {
                    var latencies: [Int64] = []
                    var outcomes: [String: Int] = [:]
                    var delivered = 0
                    while next.take(upTo: 1) == 1 {
                        let request = self.request()
                        let begin = ContinuousClock.now
                        do {
                            let response = try await client.execute(request, timeout: timeout)
                            _ = try await response.body.collect(upTo: 1 << 16)
                            if response.status == .ok { delivered += 1 } else { outcomes["status-\(response.status.code)", default: 0] += 1 }
                        } catch {
                            outcomes["error", default: 0] += 1
                        }
                        latencies.append((ContinuousClock.now - begin).nanoseconds)
                    }
                    if delivered > 0 { outcomes["delivered", default: 0] += delivered }
                    return (latencies, outcomes)
                }
            }
            return await BenchAPNsCommand.gather(&group, expecting: total)
        }
        return BenchAPNsCommand.Measurement(seconds: (ContinuousClock.now - started).seconds, latencies: results.0, outcomes: results.1)
    }

    func shutdown() async {
        for client in clients { try? await client.shutdown() }
    }
}
