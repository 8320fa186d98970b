import NIOSSL

/// How an ``APNsClient`` reaches APNs. Defaults match Apple's production
/// service and the advice to keep few, long-lived connections.
public struct APNsClientConfiguration: Sendable {
    /// Apple's two environments, or any other server (the simulator, tests).
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        /// The name checked against the server certificate and sent as SNI
        /// and `:authority`; defaults to `host`.
        public var serverName: String

        public init(host: String, port: Int = 443, serverName: String? = nil) {
            self.host = host
            self.port = port
            self.serverName = serverName ?? host
        }

        /// `api.push.apple.com:443`.
        public static let production = Endpoint(host: "api.push.apple.com")
        /// `api.sandbox.push.apple.com:443`.
        public static let sandbox = Endpoint(host: "api.sandbox.push.apple.com")
        /// `api-manage-broadcast.push.apple.com:2196`: broadcast channel management, production.
        public static let channelManagementProduction = Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
        /// `api-manage-broadcast.sandbox.push.apple.com:2195`: broadcast channel management, development.
        public static let channelManagementSandbox = Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)

        /// Parses `https://host:port` (port defaults to 443).
        public init(url: String) throws(APNsError) {
            var rest = Substring(url)
            if rest.hasPrefix("https://") { rest = rest.dropFirst("https://".count) }
            while rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.isEmpty, !rest.contains("/") else {
                throw .invalidConfiguration("endpoint \(url) is not of the form https://HOST:PORT")
            }
            if let colon = rest.lastIndex(of: ":") {
                guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
                    throw .invalidConfiguration("endpoint \(url) has an invalid port")
                }
                self.init(host: String(rest[..<colon]), port: port)
            } else {
                self.init(host: String(rest))
            }
        }

        public var description: String { "https://\(host):\(port)" }
    }

    public var endpoint: Endpoint
    /// Connections kept open to the endpoint (default 2).
    public var connections: Int
    /// Requests held above the connections' capacity; callers beyond this
    /// wait in `send` (default 1000).
    public var maxQueued: Int
    /// Longest time a request may take, queueing included (default 30 s).
    public var requestTimeout: Double
    /// Seconds before a connection attempt is abandoned (default 10 s).
    public var connectTimeout: Double
    /// An idle connection is pinged after this many seconds (default 10 min).
    public var idlePingInterval: Double
    /// A PING unanswered for this long closes the connection (default 10 s).
    public var pingTimeout: Double
    /// Certificates trusted besides the system roots (a simulator's
    /// self-signed certificate in tests).
    public var additionalTrustRoots: [NIOSSLCertificate]
    /// Turns certificate verification off. For benchmarks against a local
    /// server only; never against APNs.
    public var disablesCertificateVerification: Bool

    public init(
        endpoint: Endpoint, connections: Int = 2, maxQueued: Int = 1000, requestTimeout: Double = 30,
        connectTimeout: Double = 10, idlePingInterval: Double = 600, pingTimeout: Double = 10,
        additionalTrustRoots: [NIOSSLCertificate] = [], disablesCertificateVerification: Bool = false
    ) {
        self.endpoint = endpoint
        self.connections = connections
        self.maxQueued = maxQueued
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.idlePingInterval = idlePingInterval
        self.pingTimeout = pingTimeout
        self.additionalTrustRoots = additionalTrustRoots
        self.disablesCertificateVerification = disablesCertificateVerification
    }

    func makeTLSConfiguration() -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = disablesCertificateVerification ? .none : .fullVerification
        if !additionalTrustRoots.isEmpty {
            tls.additionalTrustRoots = [.certificates(additionalTrustRoots)]
        }
        return tls
    }

    func validate() throws(APNsError) {
        guard connections >= 1 else { throw .invalidConfiguration("connections must be at least 1") }
        guard maxQueued >= 1 else { throw .invalidConfiguration("maxQueued must be at least 1") }
        guard requestTimeout > 0 else { throw .invalidConfiguration("requestTimeout must be positive") }
        guard !endpoint.host.isEmpty else { throw .invalidConfiguration("the endpoint host is empty") }
    }
}
