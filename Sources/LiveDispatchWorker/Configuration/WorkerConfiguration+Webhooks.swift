import LiveDispatchCore
import LiveDispatchTracing

extension WorkerConfiguration {
    /// Outcome webhooks (`webhooks:`): each outcome POSTed, signed, to one
    /// URL. Off when the section is absent (``isEnabled``).
    public struct Webhooks: Sendable, Hashable {
        /// Where outcomes are POSTed, `http://` or `https://`; empty: off.
        public var url = ""
        /// The signing secret, `whsec_<base64>`. Read from the variable
        /// ``secretEnvironment`` names when that is set.
        public var secret = ""
        /// The name of an environment variable holding the secret, so that
        /// it need not sit in the file.
        public var secretEnvironment = ""
        /// Extra trusted CA certificates (a PEM file) for an `https` URL,
        /// beside the system's.
        public var caFile = ""
        /// Deadline of one request, connection and TLS handshake included.
        public var timeout: Double = 5
        /// Outcomes held at most; more are dropped and counted.
        public var maxQueue = 10_000
        /// Requests in flight at most.
        public var concurrency = 4
        /// Attempts per outcome at most, the first included.
        public var maxAttempts = 8
        /// An outcome older than this is not sent any more.
        public var maxAge: Double = 3_600

        /// Whether outcomes are sent: a URL is configured.
        public var isEnabled: Bool { !url.isEmpty }

        /// The delivery machine's bounds.
        public var queue: WebhookQueue.Configuration {
            WebhookQueue.Configuration(
                capacity: maxQueue, concurrency: concurrency, maxAttempts: maxAttempts, maxAge: maxAge,
                backoff: Backoff(base: 1, cap: 300, jitter: .full), maxRetryAfter: 300)
        }
    }
}

extension ConfigurationKey {
    /// The keys of `webhooks:`.
    static let webhooks: [ConfigurationKey] = [
        .string("webhooks.url", \.webhooks.url),
        .string("webhooks.secret", \.webhooks.secret),
        .string("webhooks.secret_env", \.webhooks.secretEnvironment),
        .string("webhooks.ca_file", \.webhooks.caFile),
        .duration("webhooks.timeout", \.webhooks.timeout),
        .integer("webhooks.max_queue", 1...10_000_000, \.webhooks.maxQueue),
        .integer("webhooks.concurrency", 1...1_024, \.webhooks.concurrency),
        .integer("webhooks.max_attempts", 1...100, \.webhooks.maxAttempts),
        .duration("webhooks.max_age", \.webhooks.maxAge),
    ]
}

extension ConfigurationLoader {
    /// Reads the secret from the variable `webhooks.secret_env` names.
    mutating func resolveWebhookSecret(_ environment: [String: String], in configuration: inout WorkerConfiguration) {
        let name = configuration.webhooks.secretEnvironment
        guard !name.isEmpty else { return }
        if positions["webhooks.secret"] != nil {
            problems.append(.init(
                location: position("webhooks.secret_env"), key: "webhooks.secret_env",
                message: "set either webhooks.secret or webhooks.secret_env, not both"))
            return
        }
        guard let value = environment[name], !value.isEmpty else {
            problems.append(.init(
                location: position("webhooks.secret_env"), key: "webhooks.secret_env",
                message: "names the environment variable \(name), which is not set or empty"))
            return
        }
        configuration.webhooks.secret = value.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A URL, a secret that signs, and a readable CA file, checked when the
    /// section (or any of its variables) is present.
    mutating func validateWebhooks(_ configuration: WorkerConfiguration) {
        let webhooks = configuration.webhooks
        let isMentioned = positions.keys.contains { $0 == "webhooks" || $0.hasPrefix("webhooks.") }
        guard isMentioned else { return }
        func fail(_ key: String, _ message: String) {
            problems.append(.init(location: position(key), key: key, message: message))
        }
        guard !webhooks.url.isEmpty else {
            fail("webhooks.url", "must be set when the webhooks: section is present (the URL outcomes are POSTed to)")
            return
        }
        if HTTP1Client.Endpoint(url: webhooks.url) == nil {
            fail("webhooks.url", "expected http://host[:port]/path or https://host[:port]/path, got \(webhooks.url.debugDescription)")
        }
        if webhooks.secret.isEmpty {
            // An unset secret_env variable was reported when it was read.
            if webhooks.secretEnvironment.isEmpty {
                fail("webhooks.secret", "must be set, or webhooks.secret_env must name a variable holding it (whsec_ followed by the key in base64)")
            }
        } else {
            do {
                _ = try WebhookSigner(secret: webhooks.secret)
            } catch {
                let key = webhooks.secretEnvironment.isEmpty ? "webhooks.secret" : "webhooks.secret_env"
                fail(key, "is not a usable secret: \(error.description)")
            }
        }
        if !webhooks.caFile.isEmpty, let problem = Self.certificateProblem(path: webhooks.caFile) {
            fail("webhooks.ca_file", problem)
        }
        if webhooks.timeout < 0.01 || webhooks.timeout > 600 {
            fail("webhooks.timeout", "must be between 10ms and 10m")
        }
        if webhooks.maxAge < 1 || webhooks.maxAge > 7 * 86_400 {
            fail("webhooks.max_age", "must be between 1s and 7d")
        }
    }
}
