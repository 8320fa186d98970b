extension PartitionDispatcher {
    /// What the machine keeps of a registration: a few words per token (the
    /// activity and token are the keys it is stored under).
    struct RegisteredToken: Sendable, Hashable, Expiring {
        // Six machine words (48 bytes): the dates without optional tags.
        private var expires: CompactUnixTime
        private var registered: CompactUnixTime
        /// What the token's `token-store` record says of its last push.
        var recorded: RecordedOutcome = .clear
        var app: String?
        var environment: APNsEnvironment

        init(environment: APNsEnvironment, expiresAt: UnixTime?, registeredAt: UnixTime?, app: String?) {
            self.environment = environment
            self.expires = CompactUnixTime(expiresAt)
            self.registered = CompactUnixTime(registeredAt)
            self.app = app
        }

        var expiresAt: UnixTime? {
            get { expires.value }
            set { expires = CompactUnixTime(newValue) }
        }

        var registeredAt: UnixTime? {
            get { registered.value }
            set { registered = CompactUnixTime(newValue) }
        }

        init(_ registration: TokenRegistration) {
            self.init(
                environment: registration.environment, expiresAt: registration.expiresAt, registeredAt: registration.registeredAt,
                app: registration.app)
            if let outcome = registration.lastOutcome, outcome.result == .failed { recorded = .failed(outcome) }
        }

        /// The token's `token-store` record with `outcome` as its last.
        func registration(_ activity: ActivityID, _ token: DeviceToken, outcome: TokenOutcome?) -> TokenRegistration {
            TokenRegistration(
                activityID: activity, token: token, environment: environment, expiresAt: expiresAt, registeredAt: registeredAt,
                lastOutcome: outcome, app: app)
        }
    }

    /// Whether a token's record names a failure. Only failures and the
    /// delivery after one are written, so the write load follows failures,
    /// not pushes; the failure is boxed so healthy tokens stay a few words.
    enum RecordedOutcome: Sendable, Hashable {
        /// No failure: the token got every push that completed since it registered.
        case clear
        /// The record names this failure; the token's next delivery clears it.
        indirect case failed(TokenOutcome)
    }
}
