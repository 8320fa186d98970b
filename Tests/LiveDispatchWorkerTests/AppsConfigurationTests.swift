import Foundation
import LiveDispatchCore
import LiveDispatchWorker
import Testing

@Suite("Configuration of several apps")
struct AppsConfigurationTests {
    /// Two apps with their own keys, sent to a simulator pair.
    static func twoApps(_ files: KeyFiles, extra: String = "") -> String {
        """
        apns:
          endpoint: 127.0.0.1:2197
        budget:
          priority_10_per_hour: 40
        apps:
          - name: scores
            bundle_id: com.example.scores
            team_id: TEAMSCORES
            key_id: KEYSCORES1
            key_path: \(files.key)
            endpoints:
              production: 127.0.0.1:3001
              sandbox: 127.0.0.1:3002
            budget:
              priority_10_per_hour: 12
          - name: courier
            bundle_id: com.example.courier
            team_id: TEAMCOURIE
            key_id: KEYCOURIE1
            key_path: \(files.key)
            environment: sandbox
        \(extra)
        """
    }

    @Test("a list of apps is read with their keys, hosts, environments and budgets")
    func list() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(yaml: Self.twoApps(files), file: "apps.yaml")
        #expect(configuration.apps.map(\.name) == ["scores", "courier"])
        let scores = configuration.apps[0]
        #expect(scores.bundleID == "com.example.scores")
        #expect(scores.teamID == "TEAMSCORES")
        #expect(scores.keyID == "KEYSCORES1")
        #expect(scores.keyPath == files.key)
        #expect(scores.environment == .production)
        #expect(scores.endpoint(.production) == "127.0.0.1:3001")
        #expect(scores.endpoint(.sandbox) == "127.0.0.1:3002")
        #expect(scores.priority10PerHour == 12)
        let courier = configuration.apps[1]
        #expect(courier.environment == .sandbox)
        #expect(courier.endpoint(.production) == "")
        #expect(courier.priority10PerHour == nil)
        #expect(configuration.resolvedApps == configuration.apps)
        #expect(configuration.appDirectory == AppDirectory([.init(name: "scores"), .init(name: "courier", environment: .sandbox)]))
        // The budget: the app's own, else the global one.
        #expect(configuration.coalescer.priority10PerHour(for: "scores") == 12)
        #expect(configuration.coalescer.priority10PerHour(for: "courier") == 40)
        #expect(configuration.coalescer.priority10PerHour(for: nil) == 40)
    }

    @Test("a mapping from name to app reads as the list does")
    func mapping() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(yaml: """
            apns:
              endpoint: 127.0.0.1:2197
            apps:
              scores:
                bundle_id: com.example.scores
                team_id: TEAMSCORES
                key_id: KEYSCORES1
                key_path: \(files.key)
                budget: {priority_10_per_hour: 0}
            """, file: "apps.yaml")
        #expect(configuration.apps.map(\.name) == ["scores"])
        #expect(configuration.apps[0].bundleID == "com.example.scores")
        // The only app's budget is everyone's, and 0 turns it off.
        #expect(configuration.coalescer.priority10PerHour(for: nil) == nil)
    }

    @Test("without apps: the apns: keys are the one app, named default")
    func singleApp() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(yaml: """
            apns:
              endpoint: 127.0.0.1:2197
              environment: sandbox
              bundle_id: com.example.one
              team_id: TEAM000001
              key_id: KEY0000001
              key_path: \(files.key)
            """, file: "one.yaml")
        #expect(configuration.apps.isEmpty)
        let apps = configuration.resolvedApps
        #expect(apps.map(\.name) == ["default"])
        #expect(apps.first?.bundleID == "com.example.one")
        #expect(apps.first?.keyPath == files.key)
        #expect(apps.first?.environment == .sandbox)
        #expect(configuration.appDirectory == AppDirectory([.init(name: "default", environment: .sandbox)]))
    }

    @Test("braze_app_id gives an app the Braze app id the Braze-compatible routes accept; two apps cannot share one")
    func brazeAppIDs() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(yaml: Self.twoApps(files, extra: "    braze_app_id: braze-courier"), file: "apps.yaml")
        #expect(configuration.apps.map(\.brazeAppID) == ["", "braze-courier"])
        let single = try WorkerConfiguration.parse(yaml: "apns:\n  endpoint: simulator\n  braze_app_id: braze-one\n", file: "one.yaml")
        #expect(single.resolvedApps.map(\.brazeAppID) == ["braze-one"])
        let shared = Self.twoApps(files, extra: "    braze_app_id: same")
            .replacingOccurrences(of: "    bundle_id: com.example.scores\n", with: "    bundle_id: com.example.scores\n    braze_app_id: same\n")
        let error = try #require(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: shared, file: "apps.yaml") }
        #expect(error.description.contains("apps.courier.braze_app_id: is also app scores's; each Braze app id names one app"), "\(error)")
    }

    @Test("problems of apps: name the file, line, column and key")
    func problems() throws {
        let files = try KeyFiles()
        let yaml = """
            apns:
              endpoint: 127.0.0.1:2197
              bundle_id: com.example.single
            apps:
              - name: scores
                bundle_id: com.example.scores
                team_id: TEAMSCORES
                key_id: KEYSCORES1
                key_path: \(files.key)
                endpoints:
                  production: not-a-host-port
                  staging: 127.0.0.1:1
                budget:
                  priority_10_per_hour: lots
                bundle: typo
              - name: scores
                bundle_id: com.example.again
              - name: "bad name!"
              - bundle_id: com.example.nameless
              - name: keyless
                bundle_id: com.example.keyless
                key_path: \(files.garbage)
            """
        let error = try #require(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: yaml, file: "apps.yaml") }
        let text = error.description
        #expect(text.contains("apps.yaml:12:7: apps.scores.endpoints.staging: unknown key (known: production, sandbox)"), "\(text)")
        #expect(text.contains("apps.yaml:14:29: apps.scores.budget.priority_10_per_hour: expected a whole number"), "\(text)")
        #expect(text.contains("apps.yaml:15:5: apps.scores.bundle: unknown key (known: braze_app_id, budget, bundle_id, endpoints, environment, key_id, key_path, name, team_id)"), "\(text)")
        #expect(text.contains("apps.yaml:16:11: apps.scores: is named twice"), "\(text)")
        #expect(text.contains("apps.yaml:18:11: apps.bad name!: \"bad name!\" is not an app name"), "\(text)")
        #expect(text.contains("apps[3].name: is required"), "\(text)")
        #expect(text.contains("apps.yaml:3:14: apns.bundle_id: describes the single app; with apps: set it on each app"), "\(text)")
        #expect(text.contains("apps.yaml:11:19: apps.scores.endpoints.production: expected host:port"), "\(text)")
        #expect(text.contains("apps.keyless.team_id: must be set"), "\(text)")
        #expect(text.contains("apps.keyless.key_path: \(files.garbage) is not a P-256 private key"), "\(text)")
    }

    @Test("per-app endpoints with the in-process simulator are refused")
    func endpointsWithSimulator() throws {
        let yaml = """
            apps:
              - name: scores
                bundle_id: com.example.scores
                endpoints: {sandbox: "127.0.0.1:3002"}
            """
        let error = try #require(throws: ConfigurationError.self) { try WorkerConfiguration.parse(yaml: yaml, file: "apps.yaml") }
        #expect(error.description.contains("apps.scores.endpoints.sandbox: with apns.endpoint simulator every app goes to the in-process simulator"))
    }

    @Test("LIVEDISPATCH_APPS_<NAME>_<KEY> overrides a key of an app of the file")
    func environmentOverrides() throws {
        let files = try KeyFiles()
        let configuration = try WorkerConfiguration.parse(
            yaml: Self.twoApps(files), file: "apps.yaml",
            environment: [
                "LIVEDISPATCH_APPS_SCORES_KEY_PATH": files.key, "LIVEDISPATCH_APPS_COURIER_ENVIRONMENT": "production",
                "LIVEDISPATCH_APPS_SCORES_ENDPOINTS_SANDBOX": "127.0.0.1:4002", "LIVEDISPATCH_APPS_COURIER_BUDGET_PRIORITY_10_PER_HOUR": "7",
            ])
        #expect(configuration.apps[1].environment == .production)
        #expect(configuration.apps[0].endpoint(.sandbox) == "127.0.0.1:4002")
        #expect(configuration.apps[1].priority10PerHour == 7)

        let error = try #require(throws: ConfigurationError.self) {
            try WorkerConfiguration.parse(
                yaml: Self.twoApps(files), file: "apps.yaml",
                environment: ["LIVEDISPATCH_APPS_NOPE_KEY_ID": "X", "LIVEDISPATCH_APPS_SCORES_ENVIRONMENT": "staging"])
        }
        #expect(error.description.contains("environment LIVEDISPATCH_APPS_NOPE_KEY_ID: names no app key of the file"), "\(error)")
        #expect(error.description.contains("environment LIVEDISPATCH_APPS_SCORES_ENVIRONMENT: apps.scores.environment: expected one of production, sandbox"), "\(error)")
    }
}
