/// What goes in and out of a partition's machine.
extension PartitionDispatcher {
    /// What one partition's machine needs to know of the configuration.
    public struct Configuration: Sendable, Hashable {
        public var coalescer: Coalescer.Configuration
        public var fanOut: FanOut.Configuration
        /// The environment of a token whose registration names none.
        public var defaultEnvironment: APNsEnvironment
        /// Prefix of the internal topics' names (dead letters name their origin).
        public var topicPrefix: String
        /// Longest a new owner holds its pushes while it reads the commands
        /// its previous owner may have pushed (see ``PartitionDispatcher/holdPushes(untilCommandOffset:)``).
        public var catchUpLimit: Double
        /// Seconds between expiry sweeps of activities and tokens.
        public var sweepInterval: Double
        /// The budget of starts per push-to-start token.
        public var pushToStart: PushToStartBudget.Configuration
        /// The deployment's apps: records naming another are dead-lettered.
        public var apps: AppDirectory
        /// Sends in flight at once for the whole partition, shared in turn
        /// by its activities and audience starts (until ``PartitionDispatcher/setSendLimit(_:now:)``
        /// changes it): a worker's share of its worker-wide limit.
        public var maxInFlight: Int

        public init(
            coalescer: Coalescer.Configuration = .init(), fanOut: FanOut.Configuration = .init(),
            defaultEnvironment: APNsEnvironment = .production, topicPrefix: String = "livedispatch.",
            sweepInterval: Double = 5, pushToStart: PushToStartBudget.Configuration = .init(), catchUpLimit: Double = 30,
            apps: AppDirectory = .unchecked, maxInFlight: Int = .max
        ) {
            self.apps = apps
            self.maxInFlight = max(1, maxInFlight)
            self.coalescer = coalescer
            self.fanOut = fanOut
            self.defaultEnvironment = defaultEnvironment
            self.topicPrefix = topicPrefix
            self.sweepInterval = max(0.001, sweepInterval)
            self.catchUpLimit = max(0, catchUpLimit)
            self.pushToStart = pushToStart
        }

        /// Full name of an internal topic.
        public func topic(_ name: InternalTopic) -> String { topicPrefix + name.rawValue }
    }

    /// A record written by the dispatcher; `ticket` comes back in
    /// ``acknowledged(_:now:)`` once Kafka has it.
    public struct Produce: Sendable, Hashable {
        public var topic: InternalTopic
        public var key: String
        /// nil writes a tombstone.
        public var value: [UInt8]?
        /// The partition for co-partitioned topics; nil lets the producer
        /// choose by key (dead letters).
        public var partition: Int32?
        public var ticket: UInt64
        /// The trace of the push whose snapshot this is, when that push
        /// merged a sampled command: the write gets a span under it.
        public var trace: TraceContext?

        public init(topic: InternalTopic, key: String, value: [UInt8]?, partition: Int32?, ticket: UInt64, trace: TraceContext? = nil) {
            self.topic = topic
            self.key = key
            self.value = value
            self.partition = partition
            self.ticket = ticket
            self.trace = trace
        }
    }

    /// One push to one device.
    public struct Send: Sendable, Hashable {
        public var activityID: ActivityID
        public var token: DeviceToken
        public var environment: APNsEnvironment
        /// The app the token belongs to: its key, bundle id and hosts; nil
        /// for the only app.
        public var app: String?
        public var push: LiveActivityPush
        /// The encoded payload, checked against APNs' size limit; one
        /// buffer shared by every send of the same version.
        public var payload: [UInt8]
        /// For a start to a push-to-start token: the offset of the
        /// audience start on `starts` it was made for.
        public var audienceStart: Int64?
        /// For a broadcast: the activity's channel (`token` is then the
        /// fan-out's stand-in for it, never sent).
        public var channel: ActivityChannel?
        /// Which send of this version to this token it is, 1 for the
        /// first; counted only for a traced push (its APNs span records it).
        public var attempt = 1

        public init(
            activityID: ActivityID, token: DeviceToken, environment: APNsEnvironment, app: String? = nil, push: LiveActivityPush,
            payload: [UInt8], audienceStart: Int64? = nil, channel: ActivityChannel? = nil
        ) {
            self.app = app
            self.activityID = activityID
            self.token = token
            self.environment = environment
            self.push = push
            self.payload = payload
            self.audienceStart = audienceStart
            self.channel = channel
        }
    }

    public enum Action: Sendable, Hashable {
        case send(Send)
        case produce(Produce)
        /// Store this offset (the next to read) for the topic's partition and commit it.
        case commit(InternalTopic, offset: Int64)
        /// Something worth counting or showing happened; no I/O needed.
        case observe(Observation)
        /// Create or delete a broadcast channel and report back.
        case channel(ChannelRequest)
    }

    /// What the dispatcher reports for metrics, logs and the demo's output.
    public enum Observation: Sendable, Hashable {
        /// A push reached every token (or they were pruned or dead-lettered):
        /// the state now on the devices, how many commands it merged, how
        /// many tokens the activity has and the first few of them.
        case pushCompleted(ActivityState, commands: Int, tokens: Int, sample: [DeviceToken], outcome: PushOutcome)
        /// The same completed push, when it merged a traced command: what
        /// its spans are made of.
        case pushTraced(PushTrace)
        case deadLettered(DeadLetter)
        case tokenRemoved(ActivityID, DeviceToken, reason: String)
        case activityExpired(ActivityID, reason: String)
        /// A command whose id was applied before was acknowledged, not applied.
        case duplicateCommand(ActivityID, commandID: String)
        /// A command was applied without a type check: its activity names
        /// no type, or one that is not declared.
        case uncheckedCommand(ActivityID, TypeChecking)
        /// The priority budget sent this version at a lower priority than asked.
        case priorityDowngraded(ActivityID, version: UInt64, from: PushPriority, to: PushPriority)
        /// An audience start is done: the push-to-start tokens it was
        /// delivered to, and how many were skipped as already started.
        case audienceStarted(ActivityID, audience: AudienceKey, delivered: [DeviceToken], alreadyStarted: Int)
        /// A broadcast activity's channel was created.
        case channelCreated(ActivityID, ActivityChannel)
        /// An expired broadcast activity's channel was deleted.
        case channelDeleted(ActivityID, channelID: String)
    }

    /// A record as read from `commands`, `tokens` or `starts`.
    public struct Record: Sendable, Hashable {
        public var offset: Int64
        public var key: [UInt8]?
        public var value: [UInt8]?
        public var timestamp: UnixTime
        /// The W3C trace context of the record's headers, when it has one.
        public var trace: TraceContext?

        public init(offset: Int64, key: [UInt8]?, value: [UInt8]?, timestamp: UnixTime, trace: TraceContext? = nil) {
            self.offset = offset
            self.key = key
            self.value = value
            self.timestamp = timestamp
            self.trace = trace
        }

        public var keyText: String? { key.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Whose ``FanOut`` an action or a send belongs to: an activity's
    /// deliveries, or the audience start at this offset on `starts`.
    enum Sender: Hashable, Sendable {
        case activity(ActivityID)
        case audienceStart(Int64)
    }

    /// What an acknowledged produce finishes.
    enum AckEffect: Sendable, Hashable {
        case completeOffsets(InternalTopic, [Int64])
        /// A write the sender's completion waits for (a dead letter, a token
        /// tombstone or outcome, an audience start written for an activity).
        case awaitedBy(Sender)
        case snapshot(ActivityID, offsets: [Int64])
        /// A push-to-start token's ledger, recording the start of the
        /// audience start at this offset, is stored: the start may be sent.
        case startRecorded(Int64, DeviceToken)
        case nothing
    }

    /// What a wake-up is for.
    enum Wake: Hashable, Sendable {
        case flush(ActivityID)
        /// A retry of a fan-out's sends.
        case retry(Sender)
        /// A retry of creating the activity's broadcast channel.
        case retryChannel(ActivityID)
    }

    /// What becomes of a fan-out's `send` action: a send to hand to APNs,
    /// or an outcome settled without one (a payload over the limit, a start
    /// that a broadcast channel is not sent).
    enum SendPlan: Sendable {
        case send(Send)
        case settle(FanOut.Outcome)
    }
}
