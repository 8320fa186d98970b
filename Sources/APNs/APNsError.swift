/// An error of the APNs client: a code that callers switch on, a message
/// that says what to do, and whether trying again can help.
public struct APNsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure; new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Value: String, Sendable, Hashable {
            case invalidKey, signingFailed, invalidConfiguration, providerTokenRejected, pushRejectedForConfiguration
            case serverRefused, timeout, cancelled, connectionFailed, connectionClosed, streamReset, protocolError, shutdown
        }
        fileprivate var value: Value
        public var description: String { value.rawValue }

        /// The `.p8` key could not be read or parsed.
        public static let invalidKey = Code(value: .invalidKey)
        /// Signing the provider token failed.
        public static let signingFailed = Code(value: .signingFailed)
        /// The client configuration is not usable (bad endpoint, bad trust roots).
        public static let invalidConfiguration = Code(value: .invalidConfiguration)
        /// APNs refused the provider token (key id, team, key or environment).
        public static let providerTokenRejected = Code(value: .providerTokenRejected)
        /// APNs refused the push because of the topic or account setup.
        public static let pushRejectedForConfiguration = Code(value: .pushRejectedForConfiguration)
        /// APNs answered 429 or 5xx.
        public static let serverRefused = Code(value: .serverRefused)
        /// The request's deadline passed before an answer.
        public static let timeout = Code(value: .timeout)
        /// The caller's task was cancelled before the answer.
        public static let cancelled = Code(value: .cancelled)
        /// No connection could be opened.
        public static let connectionFailed = Code(value: .connectionFailed)
        /// The connection closed before the answer.
        public static let connectionClosed = Code(value: .connectionClosed)
        /// The server reset the stream.
        public static let streamReset = Code(value: .streamReset)
        /// The server broke the HTTP/2 protocol.
        public static let protocolError = Code(value: .protocolError)
        /// The client was shut down.
        public static let shutdown = Code(value: .shutdown)
    }

    public var code: Code
    /// What happened and what to do about it.
    public var message: String
    /// Whether the same push may succeed if sent again later.
    public var isRetryable: Bool

    public var description: String { "\(code): \(message)" }

    static func invalidKey(_ detail: String) -> APNsError {
        APNsError(
            code: .invalidKey,
            message: "the APNs signing key cannot be used (\(detail)); check the .p8 file is the PKCS#8 PEM Apple issued",
            isRetryable: false)
    }

    static func signingFailed(_ detail: String) -> APNsError {
        APNsError(code: .signingFailed, message: "signing the provider token failed (\(detail))", isRetryable: false)
    }

    static func invalidConfiguration(_ detail: String) -> APNsError {
        APNsError(code: .invalidConfiguration, message: detail, isRetryable: false)
    }

    static func providerTokenRejected(reason: APNsReason) -> APNsError {
        APNsError(
            code: .providerTokenRejected,
            message: "APNs rejected the provider token (\(reason)); check the key id, team id, .p8 key and environment",
            isRetryable: false)
    }

    static func pushRejectedForConfiguration(status: Int, reason: APNsReason) -> APNsError {
        APNsError(
            code: .pushRejectedForConfiguration,
            message: "APNs refused the push with \(status) \(reason); check the bundle id, topic and environment",
            isRetryable: false)
    }

    static func serverRefused(status: Int, reason: APNsReason) -> APNsError {
        APNsError(code: .serverRefused, message: "APNs answered \(status) \(reason); retry later", isRetryable: true)
    }

    static func timeout(seconds: Double, connectionError: String? = nil) -> APNsError {
        let cause = connectionError.map { " while no connection could be opened (\($0))" } ?? ""
        return APNsError(
            code: .timeout, message: "no answer within the \(seconds) s deadline\(cause); retry later", isRetryable: true)
    }

    static let cancelled = APNsError(
        code: .cancelled, message: "the sending task was cancelled before APNs answered", isRetryable: true)

    static func connectionFailed(_ detail: String) -> APNsError {
        APNsError(
            code: .connectionFailed, message: "could not connect to APNs (\(detail)); check the endpoint and network",
            isRetryable: true)
    }

    static func connectionClosed(_ detail: String) -> APNsError {
        APNsError(code: .connectionClosed, message: "the connection closed before the answer (\(detail))", isRetryable: true)
    }

    static func streamReset(errorCode: UInt32) -> APNsError {
        APNsError(code: .streamReset, message: "the server reset the stream (HTTP/2 error \(errorCode))", isRetryable: true)
    }

    static func protocolError(_ detail: String) -> APNsError {
        APNsError(code: .protocolError, message: "HTTP/2 protocol error (\(detail))", isRetryable: true)
    }

    static let shutdown = APNsError(
        code: .shutdown, message: "the APNs client was shut down before the push was sent", isRetryable: true)
}
