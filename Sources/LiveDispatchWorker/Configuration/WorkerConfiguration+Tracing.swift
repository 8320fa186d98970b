import LiveDispatchTracing

extension WorkerConfiguration {
    /// Tracing (`tracing:`): off unless turned on here or by the standard
    /// `OTEL_*` environment variables.
    public struct Tracing: Sendable, Hashable {
        /// Whether spans are recorded and exported.
        public var enabled = false
        /// The OTLP/HTTP traces URL spans are posted to (`http://` only).
        public var endpoint = "http://127.0.0.1:4318/v1/traces"
        /// `service.name` of the spans.
        public var serviceName = "livedispatch"
        /// One of ``TraceSampler/names``, as `OTEL_TRACES_SAMPLER` names them.
        public var sampler = "parentbased_traceidratio"
        /// The share of new traces recorded by the ratio samplers.
        public var samplingRatio = 0.01
        /// The share of tokens whose APNs requests get spans in a recorded
        /// push, chosen by the token (the same devices in every push).
        public var apnsTokenRatio = 1.0
        /// Finished spans waiting for export at most; more are dropped and counted.
        public var queueSize = 8_192
        /// Longest a finished span waits before its batch is sent.
        public var exportInterval: Double = 1
    }

    /// The sampler ``Tracing`` names; nil when tracing is off.
    public var traceSampler: TraceSampler? {
        guard tracing.enabled else { return nil }
        return TraceSampler(named: tracing.sampler, ratio: tracing.samplingRatio)
    }
}

extension ConfigurationKey {
    /// The keys of `tracing:`.
    static let tracing: [ConfigurationKey] = [
        .bool("tracing.enabled", \.tracing.enabled),
        .string("tracing.endpoint", \.tracing.endpoint),
        .string("tracing.service_name", \.tracing.serviceName),
        .choice("tracing.sampler", TraceSampler.names, \.tracing.sampler),
        .fraction("tracing.sampling_ratio", \.tracing.samplingRatio),
        .fraction("tracing.apns_token_ratio", \.tracing.apnsTokenRatio),
        .integer("tracing.queue_size", 16...1_000_000, \.tracing.queueSize),
        .duration("tracing.export_interval", \.tracing.exportInterval),
    ]

    static func fraction(_ path: String, _ keyPath: WritableKeyPath<WorkerConfiguration, Double> & Sendable) -> ConfigurationKey {
        ConfigurationKey(path: path, kind: .fraction) { if case .fraction(let v) = $1 { $0[keyPath: keyPath] = v } }
    }
}

extension ConfigurationLoader {
    /// The OpenTelemetry variables, read before the `LIVEDISPATCH_*` ones
    /// (which win): an endpoint turns tracing on, `OTEL_SDK_DISABLED=true`
    /// turns it off whatever else says.
    static let openTelemetryNames: Set<String> = [
        "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME",
    ]

    mutating func applyOpenTelemetryEnvironment(_ environment: [String: String], to configuration: inout WorkerConfiguration) {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            positions[name] = "environment \(name)"
            return text
        }
        func fail(_ name: String, _ key: String, _ message: String) {
            problems.append(.init(location: "environment \(name)", key: key, message: message))
        }
        if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            // The base URL: the traces path is appended, as the specification says.
            configuration.tracing.endpoint = (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/v1/traces"
            configuration.tracing.enabled = true
            positions["tracing.endpoint"] = "environment OTEL_EXPORTER_OTLP_ENDPOINT"
        }
        if let traces = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            configuration.tracing.endpoint = traces
            configuration.tracing.enabled = true
            positions["tracing.endpoint"] = "environment OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        }
        if let sampler = value("OTEL_TRACES_SAMPLER") {
            if TraceSampler.names.contains(sampler) {
                configuration.tracing.sampler = sampler
            } else {
                fail("OTEL_TRACES_SAMPLER", "tracing.sampler", "expected one of \(TraceSampler.names.joined(separator: ", ")), got \(sampler.debugDescription)")
            }
        }
        if let argument = value("OTEL_TRACES_SAMPLER_ARG") {
            switch Self.parseScalar(argument, as: .fraction) {
            case .success(.fraction(let ratio)): configuration.tracing.samplingRatio = ratio
            case .success: break
            case .failure(let message): fail("OTEL_TRACES_SAMPLER_ARG", "tracing.sampling_ratio", message.text)
            }
        }
        if let name = value("OTEL_SERVICE_NAME") { configuration.tracing.serviceName = name }
        if let disabled = value("OTEL_SDK_DISABLED") {
            switch disabled.lowercased() {
            case "true": configuration.tracing.enabled = false
            case "false": break
            default: fail("OTEL_SDK_DISABLED", "tracing.enabled", "expected true or false, got \(disabled.debugDescription)")
            }
        }
    }

    /// An endpoint the exporter can post to, checked only when tracing is on.
    mutating func validateTracing(_ configuration: WorkerConfiguration) {
        let tracing = configuration.tracing
        guard tracing.enabled else { return }
        if OTLPHTTPClient.Endpoint(url: tracing.endpoint) == nil {
            problems.append(.init(
                location: position("tracing.endpoint", "tracing.enabled"), key: "tracing.endpoint",
                message: "expected an OTLP/HTTP URL http://host[:port]/path (plain HTTP: put a collector beside the worker for TLS), got \(tracing.endpoint.debugDescription)"))
        }
        if tracing.serviceName.isEmpty {
            problems.append(.init(location: position("tracing.service_name", "tracing.enabled"), key: "tracing.service_name", message: "must not be empty"))
        }
        if tracing.exportInterval < 0.01 || tracing.exportInterval > 3_600 {
            problems.append(.init(location: position("tracing.export_interval"), key: "tracing.export_interval", message: "must be between 10ms and 1h"))
        }
    }
}
