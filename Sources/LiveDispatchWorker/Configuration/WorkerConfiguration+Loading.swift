import Crypto
import Foundation
import LiveDispatchCore
import LiveDispatchRules
import NIOSSL
import Yams

/// A configuration problem, with where it was found: `file:line:column`
/// for the YAML file, or the environment variable's name.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// `Config/livedispatch.yaml:12:3` or `environment LIVEDISPATCH_COALESCE_WINDOW`.
        public var location: String
        /// Dotted key, e.g. `coalesce.window`.
        public var key: String
        public var message: String

        public var description: String { "\(location): \(key.isEmpty ? "" : "\(key): ")\(message)" }
    }

    public var problems: [Problem]

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

extension WorkerConfiguration {
    /// Loads a configuration file, then applies `LIVEDISPATCH_*` overrides
    /// from `environment`, then validates the whole. Every problem is
    /// reported at once.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> WorkerConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(problems: [.init(location: path, key: "", message: "cannot be read: \(error.localizedDescription)")])
        }
        return try parse(yaml: text, file: path, environment: environment)
    }

    /// Parses configuration text; `file` names it in messages.
    public static func parse(yaml: String, file: String, environment: [String: String] = [:]) throws(ConfigurationError) -> WorkerConfiguration {
        var loader = ConfigurationLoader(file: file)
        do {
            try YAMLBudget.files.check(yaml)
        } catch {
            throw ConfigurationError(problems: [.init(location: "\(file):\(error.line):\(error.column)", key: "", message: error.message)])
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigurationError(problems: [loader.problem(for: error)])
        } catch {
            // Never the error's text: Yams puts the whole file in some of them.
            throw ConfigurationError(problems: [.init(location: "\(file):1:1", key: "", message: "is not valid YAML")])
        }
        var configuration = WorkerConfiguration()
        if let root { loader.apply(root, to: &configuration) }
        loader.applyOpenTelemetryEnvironment(environment, to: &configuration)
        loader.applyEnvironment(environment, to: &configuration)
        loader.resolveWebhookSecret(environment, in: &configuration)
        loader.validate(configuration)
        guard loader.problems.isEmpty else { throw ConfigurationError(problems: loader.problems) }
        return configuration
    }

    /// `LIVEDISPATCH_*` variables read elsewhere than the configuration file
    /// (the log level), which the loader must not take for misspelt keys.
    public static let otherEnvironmentNames: Set<String> = ["LIVEDISPATCH_LOG_LEVEL"]

    /// Reads a duration as the configuration file does (`250ms`, `2s`, `5m`, `12h`, plain seconds).
    public static func duration(_ text: String) -> Double? { parseDuration(text) }

    /// Splits `host:port`: a host name or IPv4 address of letters, digits,
    /// `-` and `.`, and a port in `ports`; nil when the text is not that.
    public static func hostAndPort(_ text: String, ports: ClosedRange<Int>) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = text[..<colon]
        let portText = text[text.index(after: colon)...]
        let hostIsValid: Bool
        if host.hasPrefix("[") {
            // An IPv6 address in brackets, `[::1]:9464`; the host is given without them.
            host = host.dropFirst()
            hostIsValid = host.hasSuffix("]") && host.dropLast().contains(":") && host.count <= 46
                && host.dropLast().unicodeScalars.allSatisfy { $0.properties.isASCIIHexDigit || $0 == ":" || $0 == "." }
            host = host.dropLast()
        } else {
            hostIsValid = !host.isEmpty && host.utf8.count <= 253 && host.first != "-" && host.first != "."
                && host.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".") }
        }
        guard hostIsValid, !portText.isEmpty, portText.allSatisfy({ ("0"..."9").contains($0) }), let port = Int(portText), ports.contains(port) else { return nil }
        return (String(host), port)
    }

    /// The environment variable that overrides a dotted key.
    public static func environmentName(for key: String) -> String {
        "LIVEDISPATCH_" + key.uppercased().replacingOccurrences(of: ".", with: "_")
    }
}

/// One settable key of the configuration file.
struct ConfigurationKey: Sendable {
    enum Kind: Sendable {
        case string
        case integer(ClosedRange<Int>)
        case duration
        case bool
        case stringList
        case stringMap
        case choice([String])
        case apiKeys
        /// A number from 0 to 1.
        case fraction
    }

    let path: String
    let kind: Kind
    let set: @Sendable (inout WorkerConfiguration, ConfigurationValue) -> Void

    static func string(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, String> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .string) { if case .string(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func choice(_ path: String, _ options: [String], _ keyPath: WritableKeyPath<WorkerConfiguration, String> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .choice(options)) { if case .string(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func integer(_ path: String, _ range: ClosedRange<Int>, _ keyPath: WritableKeyPath<WorkerConfiguration, Int> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .integer(range)) { if case .integer(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func duration(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, Double> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .duration) { if case .duration(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func bool(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, Bool> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .bool) { if case .bool(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func list(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, [String]> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .stringList) { if case .list(let v) = $1 { $0[keyPath: keyPath] = v } }
    }

    static func map(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, [String: String]> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .stringMap) { if case .map(let v) = $1 { $0[keyPath: keyPath].merge(v) { _, new in new } } }
    }

    /// Every key of `Config/livedispatch.yaml`.
    static let all: [ConfigurationKey] = [
        .string("kafka.bootstrap", \.kafka.bootstrap),
        .string("kafka.group_id", \.kafka.groupID),
        .string("kafka.topic_prefix", \.kafka.topicPrefix),
        .bool("kafka.create_topics", \.kafka.createTopics),
        .integer("kafka.partitions", 1...10_000, \.kafka.partitions),
        .integer("kafka.replication_factor", 1...100, \.kafka.replicationFactor),
        .string("kafka.instance_id", \.kafka.instanceID),
        .map("kafka.properties", \.kafka.properties),
        .string("rules.path", \.rules.path),
        .duration("rules.reload_interval", \.rules.reloadInterval),
        .string("apns.endpoint", \.apns.endpoint),
        ConfigurationKey(path: "apns.environment", kind: .choice(APNsEnvironment.allCases.map(\.rawValue))) {
            if case .string(let v) = $1, let environment = APNsEnvironment(rawValue: v) { $0.apns.environment = environment }
        },
        .string("apns.bundle_id", \.apns.bundleID),
        .string("apns.team_id", \.apns.teamID),
        .string("apns.key_id", \.apns.keyID),
        .string("apns.key_path", \.apns.keyPath),
        .string("apns.braze_app_id", \.apns.brazeAppID),
        .integer("apns.connections", 1...64, \.apns.connections),
        .duration("apns.request_timeout", \.apns.requestTimeout),
        .list("apns.trust_roots", \.apns.trustRoots),
        .duration("coalesce.window", \.coalesce.window),
        .duration("coalesce.max_delay", \.coalesce.maxDelay),
        .duration("activity.max_age", \.activity.maxAge),
        .duration("activity.ended_retention", \.activity.endedRetention),
        ConfigurationKey(path: "activity.default_priority", kind: .integer(1...10)) {
            if case .integer(let v) = $1 { $0.activity.defaultPriority = v }
        },
        .duration("idempotency.window", \.idempotency.window),
        .integer("idempotency.max_ids_per_activity", 0...10_000, \.idempotency.maxIDsPerActivity),
        .integer("budget.priority_10_per_hour", 0...100_000, \.budget.priority10PerHour),
        .integer("retry.max_attempts", 1...100, \.retry.maxAttempts),
        .duration("retry.max_elapsed", \.retry.maxElapsed),
        .duration("retry.base_delay", \.retry.baseDelay),
        .duration("retry.max_delay", \.retry.maxDelay),
        .integer("backpressure.high_watermark", 1...10_000_000, \.backpressure.highWatermark),
        .integer("backpressure.low_watermark", 0...10_000_000, \.backpressure.lowWatermark),
        .integer("limits.max_event_bytes", 64...(64 << 20), \.limits.maxEventBytes),
        .integer("limits.max_in_flight_per_activity", 1...100_000, \.limits.maxInFlightPerActivity),
        .integer("limits.max_in_flight_per_worker", 1...1_000_000, \.limits.maxInFlightPerWorker),
        .integer("push_to_start.max_starts_per_hour", 1...3600, \.pushToStart.maxStartsPerHour),
        .string("admin.listen", \.admin.listen),
        .string("admin.probe_listen", \.admin.probeListen),
        .duration("http.idle_timeout", \.http.idleTimeout),
        .duration("http.header_timeout", \.http.headerTimeout),
        .duration("http.request_timeout", \.http.requestTimeout),
        .integer("http.max_connections", 1...1_000_000, \.http.maxConnections),
        .integer("http.max_connections_per_address", 1...1_000_000, \.http.maxConnectionsPerAddress),
        .integer("http.max_body_bytes", 1...(64 << 20), \.http.maxBodyBytes),
        .integer("http.rate_limit", 1...1_000_000, \.http.rateLimit),
        .integer("http.rate_burst", 1...1_000_000, \.http.rateBurst),
        .integer("http.rules_diff_read_events", 1...1_000_000, \.http.rulesDiffRead.events),
        .duration("http.rules_diff_read_seconds", \.http.rulesDiffRead.seconds),
        .integer("http.rules_diff_admin_events", 1...1_000_000, \.http.rulesDiffAdmin.events),
        .duration("http.rules_diff_admin_seconds", \.http.rulesDiffAdmin.seconds),
        ConfigurationKey(path: "http.api_keys", kind: .apiKeys) { if case .apiKeys(let v) = $1 { $0.http.apiKeys = v } },
        .duration("shutdown.timeout", \.shutdown.timeout),
        .duration("shutdown.release_timeout", \.shutdown.releaseTimeout),
        .duration("shutdown.linger_timeout", \.shutdown.lingerTimeout),
    ] + tracing + webhooks

    static let byPath: [String: ConfigurationKey] = Dictionary(uniqueKeysWithValues: all.map { ($0.path, $0) })
}

enum ConfigurationValue: Sendable {
    case string(String)
    case integer(Int)
    case duration(Double)
    case bool(Bool)
    case list([String])
    case map([String: String])
    case apiKeys([WorkerConfiguration.APIKey])
    case fraction(Double)
}

/// Parses `250ms`, `2s`, `5m`, `12h`, `1d`, or plain seconds, as the
/// configuration and the command line write durations.
public func parseDuration(_ text: String) -> Double? {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
    for (suffix, scale) in units where trimmed.hasSuffix(suffix) {
        if let number = Double(trimmed.dropLast(suffix.count)), number >= 0, number.isFinite { return number * scale }
    }
    if let seconds = Double(trimmed), seconds >= 0, seconds.isFinite { return seconds }
    return nil
}

struct ConfigurationLoader {
    let file: String
    var problems: [ConfigurationError.Problem] = []
    /// Where each key was set in the file, for cross-key messages.
    var positions: [String: String] = [:]

    init(file: String) { self.file = file }

    func location(_ node: Node?) -> String {
        guard let mark = node?.mark else { return file }
        return "\(file):\(mark.line):\(mark.column)"
    }

    /// The problem of a YAML error, with its position and never the file's
    /// text: Yams' own descriptions quote the file (a duplicate key's error
    /// holds all of it, secrets included).
    func problem(for error: YamlError) -> ConfigurationError.Problem {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            // A context's text is libyaml's phrase ("while scanning a quoted scalar"), not the file's.
            let detail = context.map { "\($0.text) \(problem)" } ?? problem
            return .init(location: "\(file):\(mark.line):\(mark.column)", key: "", message: "invalid YAML: \(detail)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return .init(location: "\(file):\(context.mark.line):\(context.mark.column)", key: "", message: "duplicate key \(keys) (each key may appear once)")
        case .reader(let problem, let offset, _, let yaml):
            return .init(location: location(ofByte: offset ?? 0, in: yaml), key: "", message: "invalid YAML: \(problem)")
        case .no, .memory, .writer, .emitter, .representer, .dataCouldNotBeDecoded:
            return .init(location: "\(file):1:1", key: "", message: "invalid YAML")
        }
    }

    /// `file:line:column` of a byte offset.
    func location(ofByte offset: Int, in text: String) -> String {
        var line = 1
        var column = 1
        for byte in text.utf8.prefix(max(0, offset)) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return "\(file):\(line):\(column)"
    }

    mutating func apply(_ root: Node, to configuration: inout WorkerConfiguration) {
        guard case .mapping(let sections) = root else {
            problems.append(.init(location: location(root), key: "", message: "expected a mapping of sections (kafka, rules, apns, …)"))
            return
        }
        for (keyNode, valueNode) in sections {
            let section = keyNode.string ?? ""
            positions[section] = location(keyNode)
            if section == "apps" {
                applyApps(valueNode, to: &configuration)
                continue
            }
            let sectionKeys = ConfigurationKey.all.filter { $0.path.hasPrefix(section + ".") }
            guard !sectionKeys.isEmpty else {
                let known = Set(ConfigurationKey.all.map { String($0.path.split(separator: ".")[0]) }).union(["apps"])
                problems.append(.init(location: location(keyNode), key: section, message: "unknown section\(suggestion(section, among: known))"))
                continue
            }
            if case .scalar = valueNode, valueNode.null != nil { continue }
            guard case .mapping(let entries) = valueNode else {
                problems.append(.init(location: location(valueNode), key: section, message: "expected a mapping of keys"))
                continue
            }
            for (entryKey, entryValue) in entries {
                let path = "\(section).\(entryKey.string ?? "")"
                guard let key = ConfigurationKey.byPath[path] else {
                    let known = Set(sectionKeys.map { String($0.path.dropFirst(section.count + 1)) })
                    problems.append(.init(location: location(entryKey), key: path, message: "unknown key\(suggestion(entryKey.string ?? "", among: known))"))
                    continue
                }
                positions[path] = location(entryValue)
                if let value = parse(entryValue, as: key) { key.set(&configuration, value) }
            }
        }
    }

    mutating func parse(_ node: Node, as key: ConfigurationKey) -> ConfigurationValue? {
        func fail(_ message: String) -> ConfigurationValue? {
            problems.append(.init(location: location(node), key: key.path, message: message))
            return nil
        }
        switch key.kind {
        case .apiKeys:
            return parseAPIKeys(node, key: key.path)
        case .stringList:
            if case .scalar = node, node.null != nil { return .list([]) }
            guard case .sequence(let items) = node else { return fail("expected a list of strings") }
            var strings: [String] = []
            for item in items {
                guard case .scalar(let scalar) = item else { return fail("expected a list of strings") }
                strings.append(scalar.string)
            }
            return .list(strings)
        case .stringMap:
            if case .scalar = node, node.null != nil { return .map([:]) }
            guard case .mapping(let pairs) = node else { return fail("expected a mapping of property names to values") }
            var map: [String: String] = [:]
            for (name, value) in pairs {
                guard case .scalar(let nameScalar) = name, case .scalar(let valueScalar) = value else {
                    return fail("expected a mapping of property names to string values")
                }
                map[nameScalar.string] = valueScalar.string
            }
            return .map(map)
        case .string, .integer, .duration, .bool, .choice, .fraction:
            guard case .scalar(let scalar) = node else {
                if case .mapping = node { return fail("expected a single value, got a mapping") }
                return fail("expected a single value, got a list")
            }
            switch Self.parseScalar(scalar.string, as: key.kind) {
            case .success(let value): return value
            case .failure(let message): return fail(message.text)
            }
        }
    }

    struct Message: Error { var text: String }

    static func parseScalar(_ text: String, as kind: ConfigurationKey.Kind) -> Result<ConfigurationValue, Message> {
        switch kind {
        case .string:
            return .success(.string(text))
        case .choice(let options):
            guard options.contains(text) else {
                return .failure(Message(text: "expected one of \(options.joined(separator: ", ")), got \(text.debugDescription)"))
            }
            return .success(.string(text))
        case .integer(let range):
            guard let value = Int(text.replacingOccurrences(of: "_", with: "")) else {
                return .failure(Message(text: "expected a whole number, got \(text.debugDescription)"))
            }
            guard range.contains(value) else {
                return .failure(Message(text: "\(value) is out of range (\(range.lowerBound)…\(range.upperBound))"))
            }
            return .success(.integer(value))
        case .fraction:
            guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value >= 0, value <= 1 else {
                return .failure(Message(text: "expected a number from 0 to 1, got \(text.debugDescription)"))
            }
            return .success(.fraction(value))
        case .duration:
            guard let seconds = parseDuration(text) else {
                return .failure(Message(text: "expected a duration such as 250ms, 2s, 5m or 12h, got \(text.debugDescription)"))
            }
            return .success(.duration(seconds))
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "on", "1": return .success(.bool(true))
            case "false", "no", "off", "0": return .success(.bool(false))
            default: return .failure(Message(text: "expected true or false, got \(text.debugDescription)"))
            }
        case .stringList:
            return .success(.list(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }))
        case .stringMap:
            return .failure(Message(text: "cannot be set whole from the environment; set LIVEDISPATCH_KAFKA_PROPERTIES_<NAME> per property"))
        case .apiKeys:
            return .failure(Message(text: "cannot be set from the environment; list the keys (their SHA-256 hashes) in the configuration file"))
        }
    }

    /// `LIVEDISPATCH_<SECTION>_<KEY>` overrides a key; `LIVEDISPATCH_KAFKA_PROPERTIES_<NAME>`
    /// sets the librdkafka property `<name>` (lowercase, `_` read as `.`).
    mutating func applyEnvironment(_ environment: [String: String], to configuration: inout WorkerConfiguration) {
        let propertyPrefix = "LIVEDISPATCH_KAFKA_PROPERTIES_"
        for (name, text) in environment.sorted(by: { $0.key < $1.key })
        where name.hasPrefix("LIVEDISPATCH_") && !WorkerConfiguration.otherEnvironmentNames.contains(name) {
            if name.hasPrefix(propertyPrefix) {
                let property = name.dropFirst(propertyPrefix.count).lowercased().replacingOccurrences(of: "_", with: ".")
                configuration.kafka.properties[property] = text
                continue
            }
            if applyAppEnvironment(name, text, to: &configuration) { continue }
            guard let key = ConfigurationKey.all.first(where: { WorkerConfiguration.environmentName(for: $0.path) == name }) else {
                let known = Set(ConfigurationKey.all.map { WorkerConfiguration.environmentName(for: $0.path) })
                problems.append(.init(location: "environment \(name)", key: "", message: "is not a LiveDispatch setting\(suggestion(name, among: known))"))
                continue
            }
            positions[key.path] = "environment \(name)"
            switch Self.parseScalar(text, as: key.kind) {
            case .success(let value): key.set(&configuration, value)
            case .failure(let message): problems.append(.init(location: "environment \(name)", key: key.path, message: message.text))
            }
        }
    }

    /// Rules that span keys.
    mutating func validate(_ configuration: WorkerConfiguration) {
        func check(_ condition: Bool, _ key: String, _ message: String) {
            if !condition { problems.append(.init(location: position(key), key: key, message: message)) }
        }
        check(!configuration.kafka.bootstrap.isEmpty, "kafka.bootstrap", "must name brokers (host:port,…) or be \"embedded\"")
        check(!configuration.kafka.groupID.isEmpty, "kafka.group_id", "must not be empty")
        if configuration.apps.isEmpty {
            check(!configuration.apns.bundleID.isEmpty, "apns.bundle_id", "must not be empty")
        }
        validateApps(configuration)
        check(configuration.coalesce.window <= configuration.coalesce.maxDelay, "coalesce.max_delay",
              "must be at least coalesce.window (\(configuration.coalesce.window)s)")
        check(configuration.backpressure.lowWatermark < configuration.backpressure.highWatermark, "backpressure.low_watermark",
              "must be below backpressure.high_watermark (\(configuration.backpressure.highWatermark))")
        let http = configuration.http
        for (key, seconds) in [("http.idle_timeout", http.idleTimeout), ("http.header_timeout", http.headerTimeout), ("http.request_timeout", http.requestTimeout)] {
            check(seconds >= 0.01 && seconds <= 86_400, key, "must be between 10ms and 24h")
        }
        check([1, 5, 10].contains(configuration.activity.defaultPriority), "activity.default_priority", "must be 1, 5 or 10")
        validateAPNs(configuration)
        validateTracing(configuration)
        validateWebhooks(configuration)
        if !configuration.admin.listen.isEmpty {
            check(WorkerConfiguration.hostAndPort(configuration.admin.listen, ports: 0...65535) != nil, "admin.listen",
                  "expected host:port or [ipv6]:port with a port from 0 to 65535, or empty to turn the endpoint off; got \(configuration.admin.listen.debugDescription)")
        }
        if !configuration.admin.probeListen.isEmpty {
            check(WorkerConfiguration.hostAndPort(configuration.admin.probeListen, ports: 0...65535) != nil, "admin.probe_listen",
                  "expected host:port or [ipv6]:port with a port from 0 to 65535, or empty for none; got \(configuration.admin.probeListen.debugDescription)")
        }
    }

    /// Where to point for `keys`: the first one set, else its section, else
    /// the top of the file.
    func position(_ keys: String...) -> String {
        for key in keys {
            if let position = positions[key] { return position }
        }
        for key in keys {
            if let section = key.split(separator: ".").first, let position = positions[String(section)] { return position }
        }
        return "\(file):1:1"
    }

    /// The endpoint, the key and the trust roots, read now so that a bad one
    /// stops the worker before anything starts.
    mutating func validateAPNs(_ configuration: WorkerConfiguration) {
        let apns = configuration.apns
        func fail(_ key: String, _ message: String, near fallback: String = "apns.endpoint") {
            problems.append(.init(location: position(key, fallback), key: key, message: message))
        }
        if apns.requestTimeout <= 0 { fail("apns.request_timeout", "must be more than 0s") }
        let endpoint = apns.endpoint
        let isApple = endpoint == "production" || endpoint == "sandbox"
        if !isApple, endpoint != "simulator", WorkerConfiguration.hostAndPort(endpoint, ports: 1...65535) == nil {
            fail("apns.endpoint", "expected production, sandbox, simulator or host:port with a port from 1 to 65535, got \(endpoint.debugDescription)")
            return
        }
        // The key of each app: the single app's keys are `apns.*`, an app of
        // `apps:` has its own.
        for app in configuration.resolvedApps {
            let prefix = configuration.apps.isEmpty ? "apns." : "apps.\(app.name)."
            let near = configuration.apps.isEmpty ? "apns.endpoint" : "apps.\(app.name)"
            let target = app.productionEndpoint.isEmpty && app.sandboxEndpoint.isEmpty ? endpoint : "\(app.productionEndpoint) \(app.sandboxEndpoint)"
            if isApple && app.productionEndpoint.isEmpty && app.sandboxEndpoint.isEmpty {
                if app.teamID.count != 10 { fail(prefix + "team_id", "must be the 10-character team id for a real APNs endpoint", near: near) }
                if app.keyID.count != 10 { fail(prefix + "key_id", "must be the 10-character key id for a real APNs endpoint", near: near) }
            } else if endpoint != "simulator" {
                if app.teamID.isEmpty { fail(prefix + "team_id", "must be set for endpoint \(target.debugDescription): the provider token names it", near: near) }
                if app.keyID.isEmpty { fail(prefix + "key_id", "must be set for endpoint \(target.debugDescription): the provider token names it", near: near) }
            }
            if app.keyPath.isEmpty {
                if endpoint != "simulator" {
                    fail(prefix + "key_path", "must name the .p8 signing key file (PKCS#8 PEM) for endpoint \(target.debugDescription)", near: near)
                }
            } else if let problem = Self.signingKeyProblem(path: app.keyPath) {
                fail(prefix + "key_path", problem, near: near)
            }
        }
        for path in apns.trustRoots {
            if let problem = Self.fileProblem(path) ?? Self.certificateProblem(path: path) {
                fail("apns.trust_roots", problem, near: "apns.trust_roots")
            }
        }
    }

    /// Why a file cannot be read, saying which of the usual reasons it is.
    /// Only regular files of at most `maxBytes` are read (`/dev/zero` as a
    /// key would never end).
    static func fileProblem(_ path: String, maxBytes: Int = 1 << 20) -> String? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return "\(path) does not exist" }
        if isDirectory.boolValue { return "\(path) is a directory, not a file" }
        guard FileManager.default.isReadableFile(atPath: path) else { return "\(path) cannot be read (permission denied)" }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard attributes?[.type] as? FileAttributeType == .typeRegular else { return "\(path) is not a regular file" }
        if let size = (attributes?[.size] as? NSNumber)?.intValue, size > maxBytes {
            return "\(path) is \(size) bytes, more than \(maxBytes)"
        }
        return nil
    }

    /// Why the file is not an APNs signing key: missing, unreadable, not a
    /// PKCS#8 PEM private key, or a key of another curve than P-256. Never
    /// quotes the file.
    static func signingKeyProblem(path: String) -> String? {
        if let problem = fileProblem(path, maxBytes: 64 << 10) { return problem }
        guard let data = FileManager.default.contents(atPath: path), let pem = String(data: data, encoding: .utf8) else {
            return "\(path) is not a text PEM file"
        }
        if (try? P256.Signing.PrivateKey(pemRepresentation: pem)) != nil { return nil }
        if (try? P384.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            return "\(path) is a P-384 key; APNs signing keys are P-256 (ES256)"
        }
        if (try? P521.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            return "\(path) is a P-521 key; APNs signing keys are P-256 (ES256)"
        }
        return "\(path) is not a P-256 private key in PKCS#8 PEM (a .p8 file starting with -----BEGIN PRIVATE KEY-----)"
    }

    /// Why the file is not a PEM file of CA certificates.
    static func certificateProblem(path: String) -> String? {
        guard let certificates = try? NIOSSLCertificate.fromPEMFile(path), !certificates.isEmpty else {
            return "\(path) is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)"
        }
        return nil
    }

    /// ` (did you mean X?)` when a known name is within two edits.
    func suggestion(_ name: String, among known: Set<String>) -> String {
        let best = known.map { ($0, name.lowercased().editDistance(to: $0.lowercased())) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= 2 else { return " (known: \(known.sorted().joined(separator: ", ")))" }
        return " (did you mean \(best.0)?)"
    }
}
