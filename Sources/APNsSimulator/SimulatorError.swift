/// A failure of the APNs simulator: bad configuration, a key or certificate
/// that cannot be read, or a server that cannot start.
public struct SimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case invalidKey
        case invalidCertificate
        case invalidConfiguration
        case startFailed
        case http2
    }

    private let code: Code
    /// What went wrong and what to do about it.
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A key (`.p8` private key or public key PEM) could not be read or parsed.
    public static func invalidKey(_ message: String) -> SimulatorError { .init(.invalidKey, message) }
    /// A certificate or its private key could not be read, built or parsed.
    public static func invalidCertificate(_ message: String) -> SimulatorError { .init(.invalidCertificate, message) }
    /// A configuration value is out of range or inconsistent.
    public static func invalidConfiguration(_ message: String) -> SimulatorError {
        .init(.invalidConfiguration, message)
    }
    /// The listening socket could not be opened.
    public static func startFailed(_ message: String) -> SimulatorError { .init(.startFailed, message) }
    /// nghttp2 refused to create or drive a session.
    public static func http2(_ message: String) -> SimulatorError { .init(.http2, message) }

    public var isInvalidKey: Bool { code == .invalidKey }
    public var isInvalidCertificate: Bool { code == .invalidCertificate }
    public var isInvalidConfiguration: Bool { code == .invalidConfiguration }
    public var isStartFailed: Bool { code == .startFailed }

    public var description: String { message }
}
