import LiveDispatchCore
import LiveDispatchWorker
import Logging
import Testing

@Suite("Webhook configuration")
struct WebhookConfigurationTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    @Test("no webhooks: section, no webhooks, and no sender")
    func absent() throws {
        let configuration = try WorkerConfiguration.parse(yaml: "{}", file: "w.yaml")
        #expect(!configuration.webhooks.isEnabled)
        #expect(try WebhookSender(configuration: configuration.webhooks, logger: Logger(label: "t")) == nil)
    }

    @Test("the section's keys and their defaults")
    func section() throws {
        let defaults = try WorkerConfiguration.parse(yaml: """
            webhooks:
              url: https://hooks.example.com/livedispatch
              secret: \(Self.secret)
            """, file: "w.yaml")
        #expect(defaults.webhooks.isEnabled)
        #expect(defaults.webhooks.timeout == 5)
        #expect(defaults.webhooks.queue == WebhookQueue.Configuration(
            capacity: 10_000, concurrency: 4, maxAttempts: 8, maxAge: 3_600, backoff: Backoff(base: 1, cap: 300, jitter: .full),
            maxRetryAfter: 300))

        let set = try WorkerConfiguration.parse(yaml: """
            webhooks:
              url: http://127.0.0.1:8080/hooks
              secret_env: HOOK_SECRET
              timeout: 750ms
              max_queue: 500
              concurrency: 2
              max_attempts: 3
              max_age: 10m
            """, file: "w.yaml", environment: ["HOOK_SECRET": Self.secret + "\n"])
        #expect(set.webhooks.secret == Self.secret)
        #expect(set.webhooks.timeout == 0.75)
        #expect(set.webhooks.queue.capacity == 500 && set.webhooks.queue.concurrency == 2)
        #expect(set.webhooks.queue.maxAttempts == 3 && set.webhooks.queue.maxAge == 600)
        let sender = try #require(try WebhookSender(configuration: set.webhooks, logger: Logger(label: "t")))
        #expect(sender.endpoint.description == "http://127.0.0.1:8080/hooks")
    }

    @Test("LIVEDISPATCH_WEBHOOKS_* variables set the keys, the secret included")
    func environment() throws {
        let configuration = try WorkerConfiguration.parse(yaml: "{}", file: "w.yaml", environment: [
            "LIVEDISPATCH_WEBHOOKS_URL": "https://hooks.example.com/", "LIVEDISPATCH_WEBHOOKS_SECRET": Self.secret,
            "LIVEDISPATCH_WEBHOOKS_CONCURRENCY": "8",
        ])
        #expect(configuration.webhooks.isEnabled && configuration.webhooks.concurrency == 8)
    }

    @Test("bad values are reported with their key and position, and the secret is never quoted")
    func problems() {
        do {
            _ = try WorkerConfiguration.parse(yaml: """
                webhooks:
                  url: ftp://hooks.example.com/
                  secret: whsec_c2hvcnQ=
                  timeout: soon
                  max_queue: 0
                  concurrency: 5000
                  max_attempts: many
                  max_age: 30d
                  ca_file: /nonexistent/ca.pem
                """, file: "w.yaml")
            Issue.record("the configuration loaded")
        } catch {
            #expect(error.problems.map(\.description) == [
                "w.yaml:4:12: webhooks.timeout: expected a duration such as 250ms, 2s, 5m or 12h, got \"soon\"",
                "w.yaml:5:14: webhooks.max_queue: 0 is out of range (1…10000000)",
                "w.yaml:6:16: webhooks.concurrency: 5000 is out of range (1…1024)",
                "w.yaml:7:17: webhooks.max_attempts: expected a whole number, got \"many\"",
                "w.yaml:2:8: webhooks.url: expected http://host[:port]/path or https://host[:port]/path, got \"ftp://hooks.example.com/\"",
                "w.yaml:3:11: webhooks.secret: is not a usable secret: the key is 5 bytes; use at least 16 (24 to 64 are usual)",
                "w.yaml:9:12: webhooks.ca_file: /nonexistent/ca.pem is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)",
                "w.yaml:8:12: webhooks.max_age: must be between 1s and 7d",
            ])
            #expect(!error.description.contains("c2hvcnQ"))
        }
    }

    @Test("a section without a URL, a missing secret, or both secret and secret_env are refused")
    func missingAndConflicting() {
        func problems(_ yaml: String, environment: [String: String] = [:]) -> [String] {
            do {
                _ = try WorkerConfiguration.parse(yaml: yaml, file: "w.yaml", environment: environment)
                return []
            } catch {
                return error.problems.map(\.description)
            }
        }
        #expect(problems("webhooks:\n  secret: \(Self.secret)\n") == [
            "w.yaml:1:1: webhooks.url: must be set when the webhooks: section is present (the URL outcomes are POSTed to)",
        ])
        #expect(problems("webhooks:\n  url: http://h/\n") == [
            "w.yaml:1:1: webhooks.secret: must be set, or webhooks.secret_env must name a variable holding it (whsec_ followed by the key in base64)",
        ])
        #expect(problems("webhooks:\n  url: http://h/\n  secret_env: NOT_SET\n") == [
            "w.yaml:3:15: webhooks.secret_env: names the environment variable NOT_SET, which is not set or empty",
        ])
        #expect(problems("webhooks:\n  url: http://h/\n  secret: \(Self.secret)\n  secret_env: S\n", environment: ["S": Self.secret]) == [
            "w.yaml:4:15: webhooks.secret_env: set either webhooks.secret or webhooks.secret_env, not both",
        ])
        #expect(problems("webhooks:\n  url: http://h/\n  secret_env: S\n", environment: ["S": "plain"]) == [
            "w.yaml:3:15: webhooks.secret_env: is not a usable secret: expected whsec_ followed by the key in base64",
        ])
    }
}
