import LiveDispatchCore
import Yams

/// `apps:` — the apps one deployment sends for. Either a list of apps, each
/// with its `name`, or a mapping from name to app:
///
/// ```yaml
/// apps:
///   - name: scores
///     bundle_id: com.example.scores
///     team_id: TEAM123456
///     key_id: KEY1234567
///     key_path: /etc/livedispatch/keys/scores.p8
///     environment: production
///     endpoints: {production: "127.0.0.1:2197", sandbox: "127.0.0.1:2198"}
///     budget: {priority_10_per_hour: 30}
/// ```
extension ConfigurationLoader {
    /// The settable keys of one app, as written under it (and, upper-cased
    /// with `_` for `.`, after `LIVEDISPATCH_APPS_<NAME>_`).
    static let appKeys: [(path: String, kind: ConfigurationKey.Kind, set: @Sendable (inout WorkerConfiguration.App, ConfigurationValue) -> Void)] = [
        ("bundle_id", .string, { if case .string(let v) = $1 { $0.bundleID = v } }),
        ("team_id", .string, { if case .string(let v) = $1 { $0.teamID = v } }),
        ("key_id", .string, { if case .string(let v) = $1 { $0.keyID = v } }),
        ("key_path", .string, { if case .string(let v) = $1 { $0.keyPath = v } }),
        ("environment", .choice(APNsEnvironment.allCases.map(\.rawValue)), {
            if case .string(let v) = $1, let environment = APNsEnvironment(rawValue: v) { $0.environment = environment }
        }),
        ("endpoints.production", .string, { if case .string(let v) = $1 { $0.productionEndpoint = v } }),
        ("endpoints.sandbox", .string, { if case .string(let v) = $1 { $0.sandboxEndpoint = v } }),
        ("budget.priority_10_per_hour", .integer(0...100_000), { if case .integer(let v) = $1 { $0.priority10PerHour = v } }),
        ("braze_app_id", .string, { if case .string(let v) = $1 { $0.brazeAppID = v } }),
    ]

    /// Reads the `apps:` section.
    mutating func applyApps(_ node: Node, to configuration: inout WorkerConfiguration) {
        if case .scalar = node, node.null != nil { return }
        var entries: [(nameNode: Node?, name: String?, body: Node, isListItem: Bool)] = []
        switch node {
        case .sequence(let items):
            for item in items {
                guard case .mapping(let fields) = item else {
                    problems.append(.init(location: location(item), key: "apps", message: "expected an app: a mapping with name, bundle_id, team_id, key_id, key_path, …"))
                    continue
                }
                let nameNode = fields.first { $0.key.string == "name" }?.value
                entries.append((nameNode, nameNode?.string, item, true))
            }
        case .mapping(let pairs):
            for (key, value) in pairs { entries.append((key, key.string, value, false)) }
        default:
            problems.append(.init(location: location(node), key: "apps", message: "expected a list of apps (or a mapping from app name to app)"))
            return
        }
        for (index, entry) in entries.enumerated() {
            guard let name = entry.name else {
                problems.append(.init(location: location(entry.body), key: "apps[\(index)].name", message: "is required: records name their app by it"))
                continue
            }
            let key = "apps.\(name)"
            if let problem = AppDirectory.nameProblem(name) {
                problems.append(.init(location: location(entry.nameNode), key: key, message: problem))
                continue
            }
            if configuration.apps.contains(where: { $0.name == name }) {
                problems.append(.init(location: location(entry.nameNode), key: key, message: "is named twice; each app has one name"))
                continue
            }
            positions[key] = location(entry.nameNode)
            configuration.apps.append(parseApp(name, entry.body, isListItem: entry.isListItem))
        }
    }

    private mutating func parseApp(_ name: String, _ node: Node, isListItem: Bool) -> WorkerConfiguration.App {
        var app = WorkerConfiguration.App(name: name, bundleID: "")
        let prefix = "apps.\(name)."
        guard case .mapping(let fields) = node else {
            problems.append(.init(location: location(node), key: "apps.\(name)", message: "expected a mapping with bundle_id, team_id, key_id, key_path, …"))
            return app
        }
        let known = Set(Self.appKeys.map { String($0.path.split(separator: ".")[0]) }).union(isListItem ? ["name"] : [])
        for (keyNode, value) in fields {
            let field = keyNode.string ?? ""
            if field == "name", isListItem { continue }
            switch field {
            case "endpoints", "budget":
                guard case .mapping(let inner) = value else {
                    problems.append(.init(location: location(value), key: prefix + field, message: "expected a mapping"))
                    continue
                }
                for (innerKey, innerValue) in inner { set(&app, path: "\(field).\(innerKey.string ?? "")", keyNode: innerKey, value: innerValue, prefix: prefix) }
            default:
                guard known.contains(field) else {
                    problems.append(.init(location: location(keyNode), key: prefix + field, message: "unknown key\(suggestion(field, among: known))"))
                    continue
                }
                set(&app, path: field, keyNode: keyNode, value: value, prefix: prefix)
            }
        }
        return app
    }

    private mutating func set(_ app: inout WorkerConfiguration.App, path: String, keyNode: Node, value: Node, prefix: String) {
        guard let key = Self.appKeys.first(where: { $0.path == path }) else {
            let section = String(path.split(separator: ".")[0])
            let known = Set(Self.appKeys.filter { $0.path.hasPrefix(section + ".") }.map { String($0.path.dropFirst(section.count + 1)) })
            let inner = String(path.dropFirst(section.count + 1))
            problems.append(.init(location: location(keyNode), key: prefix + path, message: "unknown key\(suggestion(inner, among: known))"))
            return
        }
        guard case .scalar(let scalar) = value else {
            problems.append(.init(location: location(value), key: prefix + path, message: "expected a single value"))
            return
        }
        positions[prefix + path] = location(value)
        switch Self.parseScalar(scalar.string, as: key.kind) {
        case .success(let parsed): key.set(&app, parsed)
        case .failure(let message): problems.append(.init(location: location(value), key: prefix + path, message: message.text))
        }
    }

    /// `LIVEDISPATCH_APPS_<NAME>_<KEY>` overrides a key of an app of the
    /// file (`<NAME>` upper-cased, `-` and `.` read as `_`); true when
    /// `name` is such a variable.
    mutating func applyAppEnvironment(_ name: String, _ text: String, to configuration: inout WorkerConfiguration) -> Bool {
        let sectionPrefix = "LIVEDISPATCH_APPS_"
        guard name.hasPrefix(sectionPrefix) else { return false }
        for index in configuration.apps.indices {
            let app = configuration.apps[index]
            let appPrefix = sectionPrefix + Self.environmentWord(app.name) + "_"
            guard name.hasPrefix(appPrefix) else { continue }
            let rest = String(name.dropFirst(appPrefix.count))
            guard let key = Self.appKeys.first(where: { Self.environmentWord($0.path) == rest }) else { continue }
            let path = "apps.\(app.name).\(key.path)"
            positions[path] = "environment \(name)"
            switch Self.parseScalar(text, as: key.kind) {
            case .success(let value): key.set(&configuration.apps[index], value)
            case .failure(let message): problems.append(.init(location: "environment \(name)", key: path, message: message.text))
            }
            return true
        }
        let names = configuration.apps.map { sectionPrefix + Self.environmentWord($0.name) + "_<KEY>" }
        let keys = Self.appKeys.map { Self.environmentWord($0.path) }.joined(separator: ", ")
        problems.append(.init(
            location: "environment \(name)", key: "",
            message: "names no app key of the file: expected \(names.isEmpty ? "apps: in the file" : names.joined(separator: " or ")) with <KEY> one of \(keys)"))
        return true
    }

    static func environmentWord(_ text: String) -> String {
        String(text.uppercased().map { $0 == "-" || $0 == "." ? "_" : $0 })
    }

    /// The `apns:` keys that describe the single app; with `apps:` they
    /// belong on each app.
    static let singleAppKeys = ["apns.bundle_id", "apns.team_id", "apns.key_id", "apns.key_path", "apns.environment", "apns.braze_app_id"]

    /// Rules of `apps:`: no single-app `apns:` keys beside it, a bundle id
    /// and a usable key per app, and per-app endpoints only where there is
    /// no in-process simulator.
    mutating func validateApps(_ configuration: WorkerConfiguration) {
        guard !configuration.apps.isEmpty else { return }
        for key in Self.singleAppKeys {
            if let position = positions[key] {
                problems.append(.init(location: position, key: key, message: "describes the single app; with apps: set it on each app"))
            }
        }
        var brazeAppIDs: [String: String] = [:]
        for app in configuration.apps {
            let prefix = "apps.\(app.name)."
            if !app.brazeAppID.isEmpty {
                if let other = brazeAppIDs[app.brazeAppID] {
                    problems.append(.init(
                        location: position(prefix + "braze_app_id"), key: prefix + "braze_app_id",
                        message: "is also app \(other)'s; each Braze app id names one app"))
                }
                brazeAppIDs[app.brazeAppID] = app.name
            }
            if app.bundleID.isEmpty {
                problems.append(.init(location: position(prefix + "bundle_id", "apps.\(app.name)"), key: prefix + "bundle_id", message: "is required"))
            }
            for environment in APNsEnvironment.allCases where !app.endpoint(environment).isEmpty {
                let key = prefix + "endpoints.\(environment.rawValue)"
                if configuration.apns.endpoint == "simulator" {
                    problems.append(.init(
                        location: position(key), key: key,
                        message: "with apns.endpoint simulator every app goes to the in-process simulator; remove it or set apns.endpoint"))
                } else if WorkerConfiguration.hostAndPort(app.endpoint(environment), ports: 1...65535) == nil {
                    problems.append(.init(
                        location: position(key), key: key,
                        message: "expected host:port with a port from 1 to 65535, got \(app.endpoint(environment).debugDescription)"))
                }
            }
        }
    }
}
