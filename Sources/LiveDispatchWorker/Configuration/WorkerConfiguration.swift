import LiveDispatchCore

/// Everything a worker needs to run, loaded from `Config/livedispatch.yaml`
/// and `LIVEDISPATCH_*` environment variables. Every default here is the
/// documented default of `Config/livedispatch.yaml`.
public struct WorkerConfiguration: Sendable, Hashable {
    public struct Kafka: Sendable, Hashable {
        /// `host:port,…`, or `embedded` for librdkafka's in-process mock cluster.
        public var bootstrap = "embedded"
        public var groupID = "livedispatch"
        /// Prefix of the internal topics (`commands`, `tokens`, `state`, …).
        public var topicPrefix = "livedispatch."
        /// Create missing internal topics at start.
        public var createTopics = true
        /// Partitions of internal topics created at start.
        public var partitions = 6
        public var replicationFactor = 1
        /// `group.instance.id` for static membership; empty for none.
        public var instanceID = ""
        /// Raw librdkafka properties (`security.protocol`, `sasl.*`, `ssl.*`, …).
        public var properties: [String: String] = [:]
    }

    public struct Rules: Sendable, Hashable {
        /// Directory of rule files (`*.yaml`).
        public var path = "Config/rules"
        /// How often the directory is checked for changes; 0 turns reloading off.
        public var reloadInterval: Double = 5
    }

    public struct APNs: Sendable, Hashable {
        /// `production`, `sandbox`, `simulator` (an in-process simulator with a
        /// generated key) or `host:port` (e.g. a simulator elsewhere).
        public var endpoint = "simulator"
        /// Environment of tokens registered without one.
        public var environment = APNsEnvironment.production
        public var bundleID = "com.example.livedispatch"
        public var teamID = ""
        public var keyID = ""
        /// Path of the `.p8` signing key (PKCS#8 PEM).
        public var keyPath = ""
        /// The app's Braze app API identifier, which the Braze-compatible
        /// routes accept in `app_id` besides the app's name and bundle id.
        public var brazeAppID = ""
        /// Connections per (host, key, bundle id): one pool each.
        public var connections = 2
        /// Deadline of one request.
        public var requestTimeout: Double = 10
        /// Extra trusted CA certificates (PEM files), e.g. a simulator's.
        public var trustRoots: [String] = []
    }

    /// One app the deployment sends for (`apps:`): its bundle id, the key
    /// its provider tokens are signed with, the default environment of its
    /// tokens, where its pushes go and its priority budget.
    public struct App: Sendable, Hashable {
        /// What records name in `app`.
        public var name: String
        public var bundleID: String
        public var teamID = ""
        public var keyID = ""
        /// Path of the `.p8` signing key (PKCS#8 PEM).
        public var keyPath = ""
        /// Environment of this app's tokens registered without one.
        public var environment = APNsEnvironment.production
        /// `host:port` of the production host, instead of the one
        /// `apns.endpoint` gives (a simulator, a test); empty for that one.
        public var productionEndpoint = ""
        /// `host:port` of the sandbox host; empty for `apns.endpoint`'s.
        public var sandboxEndpoint = ""
        /// `budget.priority_10_per_hour` of this app's activities; nil for
        /// the global one, 0 turns it off.
        public var priority10PerHour: Int?
        /// The app's Braze app API identifier, which the Braze-compatible
        /// routes accept in `app_id` besides the app's name and bundle id;
        /// empty for none.
        public var brazeAppID = ""

        public init(name: String, bundleID: String) {
            self.name = name
            self.bundleID = bundleID
        }

        /// The `host:port` override of `environment`, empty for none.
        public func endpoint(_ environment: APNsEnvironment) -> String {
            switch environment {
            case .production: productionEndpoint
            case .sandbox: sandboxEndpoint
            }
        }
    }

    public struct Coalesce: Sendable, Hashable {
        public var window: Double = 0.25
        public var maxDelay: Double = 1
    }

    public struct Activity: Sendable, Hashable {
        public var maxAge: Double = 12 * 3600
        /// How long an ended activity without a dismissal date is kept.
        public var endedRetention: Double = 4 * 3600
        /// Priority when no command names one.
        public var defaultPriority = 10
    }

    public struct Idempotency: Sendable, Hashable {
        /// How long a command id is remembered per activity.
        public var window: Double = 24 * 3600
        /// Most command ids remembered per activity (the newest); 0 turns it off.
        public var maxIDsPerActivity = 256
    }

    public struct Budget: Sendable, Hashable {
        /// Priority-10 pushes per activity in any hour; past it an update
        /// without an alert goes at priority 5. 0 turns the budget off.
        public var priority10PerHour = 60
    }

    public struct Retry: Sendable, Hashable {
        public var maxAttempts = 6
        public var maxElapsed: Double = 120
        public var baseDelay: Double = 0.2
        public var maxDelay: Double = 30
    }

    public struct Backpressure: Sendable, Hashable {
        /// Records in progress above which the consumer pauses its partitions.
        /// A record stays in progress through its coalescing (up to
        /// `coalesce.max_delay` while its activity keeps changing), its
        /// push and its snapshot's ack, so a worker taking in R records/s
        /// holds about R × 1.5 s of them: 100,000 lets it take in 30,000
        /// events/s and more, at some 10 MB. 20,000 capped it near 28,000.
        public var highWatermark = 100_000
        /// Records in progress below which it resumes them.
        public var lowWatermark = 50_000
    }

    public struct Limits: Sendable, Hashable {
        /// Largest domain event accepted, in bytes.
        public var maxEventBytes = 1 << 20
        /// Sends in flight at once for one activity.
        public var maxInFlightPerActivity = 256
        /// Sends in flight at once for the whole worker, shared by the
        /// partitions it owns by demand (``SendLimitShares``); each
        /// partition's share goes to its activities in turn. Bounds the
        /// worker's memory however many activities fan out at once. APNs
        /// carries 500–1,500 streams per connection: sends beyond what the
        /// connections carry only wait in the pool's queue (a 1M-token
        /// fan-out grew the worker by 49–90 MB with 16,384 and 13–27 MB
        /// with 4,096, and was no faster; BENCHMARKS.md).
        public var maxInFlightPerWorker = 4_096
    }

    public struct PushToStart: Sendable, Hashable {
        /// Starts one push-to-start token may be sent in any sliding hour;
        /// more are dead-lettered `start-rate-limited`.
        public var maxStartsPerHour = 10
    }

    public struct Admin: Sendable, Hashable {
        /// `host:port` of the worker's HTTP server (health, metrics, status,
        /// the ingest API); empty turns it off. Its limits and keys are `http.*`.
        public var listen = "127.0.0.1:9464"
        /// `host:port` of a second listener that answers only `/healthz`,
        /// `/readyz`, `/metrics` and `/status`, with connections of its own,
        /// so probes and scrapes stay fast while clients of `listen` hold
        /// every connection it serves; empty for none.
        public var probeListen = ""
    }

    public struct Shutdown: Sendable, Hashable {
        /// Longest a graceful shutdown may take before in-flight work is handed back.
        public var timeout: Double = 30
        /// Longest a revoked partition (a scale event, or this worker
        /// leaving) waits for its sends and writes under way before it is
        /// released; what they had not finished is redone by the next owner.
        public var releaseTimeout: Double = 2
        /// Longest a partition revoked by a scale event (or by this
        /// worker's SIGTERM, when others run) is still pushed by this
        /// worker, until its next owner claims it (the group assigns it
        /// there only in a second round, which can take seconds); 0 releases
        /// it at once. A new owner waits up to this plus `release_timeout`
        /// for a previous owner that died lingering.
        public var lingerTimeout: Double = 10
    }

    public var kafka = Kafka()
    public var rules = Rules()
    public var apns = APNs()
    /// The apps of `apps:`; empty when the file has the single app of
    /// `apns:` (see ``resolvedApps``).
    public var apps: [App] = []
    public var coalesce = Coalesce()
    public var activity = Activity()
    public var idempotency = Idempotency()
    public var budget = Budget()
    public var retry = Retry()
    public var backpressure = Backpressure()
    public var limits = Limits()
    public var pushToStart = PushToStart()
    public var admin = Admin()
    public var http = HTTP()
    public var shutdown = Shutdown()
    public var tracing = Tracing()
    public var webhooks = Webhooks()

    public init() {}

    /// The group consumers' settings, unless `kafka.properties` says
    /// otherwise. Members heartbeat every second rather than every 3: a
    /// cooperative rebalance takes two rounds, and members learn of each
    /// round by their next heartbeat, so a moved partition waits about that
    /// long between its release and its new owner.
    ///
    /// `fetch.wait.max.ms` is not set: the consumers long-poll with
    /// librdkafka's 500 ms, and Apache Kafka answers a waiting fetch as soon
    /// as a record arrives (`fetch.min.bytes` 1), so an idle worker sends
    /// each broker about two fetches a second per consumer and a record is
    /// not held back. Brokers that hold an empty fetch for its whole wait
    /// (librdkafka's mock cluster, Tansu) need a short wait in
    /// `kafka.properties`; the embedded cluster gets one by itself
    /// (`embeddedClusterConsumerProperties`).
    public static let lowLatencyConsumerProperties: [String: String] = ["heartbeat.interval.ms": "1000"]

    /// What `kafka.bootstrap: embedded` adds to `kafka.properties` unless
    /// they say otherwise: librdkafka's mock cluster holds an empty fetch
    /// for its whole `fetch.wait.max.ms` instead of answering when a record
    /// arrives, so a long poll would delay every record by up to 500 ms.
    public static let embeddedClusterConsumerProperties: [String: String] = ["fetch.wait.max.ms": "10"]

    /// Full name of an internal topic, e.g. `livedispatch.commands`.
    public func topic(_ name: InternalTopic) -> String { kafka.topicPrefix + name.rawValue }

    /// The apps the worker sends for: those of `apps:`, or the one the
    /// `apns:` keys describe, named `default`.
    public var resolvedApps: [App] {
        guard apps.isEmpty else { return apps }
        var app = App(name: AppDirectory.defaultName, bundleID: apns.bundleID)
        app.teamID = apns.teamID
        app.keyID = apns.keyID
        app.keyPath = apns.keyPath
        app.environment = apns.environment
        app.brazeAppID = apns.brazeAppID
        return [app]
    }

    /// What records are checked against: each app's name and default environment.
    public var appDirectory: AppDirectory {
        AppDirectory(resolvedApps.map { AppDirectory.App(name: $0.name, environment: $0.environment) })
    }

    public var coalescer: Coalescer.Configuration {
        func budget(_ count: Int) -> Int? { count > 0 ? count : nil }
        var byApp: [String: Int?] = [:]
        for app in apps {
            if let own = app.priority10PerHour { byApp[app.name] = budget(own) }
        }
        // Records of the only app may name none: its budget is everyone's.
        let only = apps.count == 1 ? apps[0].priority10PerHour : nil
        let global = budget(only ?? self.budget.priority10PerHour)
        return Coalescer.Configuration(
            window: coalesce.window, maxDelay: coalesce.maxDelay, maxAge: activity.maxAge,
            endedRetention: activity.endedRetention,
            defaultPriority: (try? PushPriority(activity.defaultPriority)) ?? .immediate,
            idempotencyWindow: idempotency.window, maxRememberedIDs: idempotency.maxIDsPerActivity,
            priority10PerHour: global, priority10PerHourByApp: byApp)
    }

    /// A fresh pause/resume gate with the configured watermarks.
    public var backpressureGate: BackpressureGate {
        BackpressureGate(highWatermark: backpressure.highWatermark, lowWatermark: backpressure.lowWatermark)
    }

    public var fanOut: FanOut.Configuration {
        FanOut.Configuration(
            maxInFlight: limits.maxInFlightPerActivity,
            retry: RetryPolicy(maxAttempts: retry.maxAttempts, maxElapsed: retry.maxElapsed, baseDelay: retry.baseDelay, maxDelay: retry.maxDelay))
    }

    /// What one partition's ``PartitionDispatcher`` is configured with.
    public var partitionDispatcher: PartitionDispatcher.Configuration {
        PartitionDispatcher.Configuration(
            coalescer: coalescer, fanOut: fanOut, defaultEnvironment: apns.environment, topicPrefix: kafka.topicPrefix,
            pushToStart: PushToStartBudget.Configuration(maxStartsPerHour: pushToStart.maxStartsPerHour), apps: appDirectory,
            maxInFlight: limits.maxInFlightPerWorker)
    }
}
