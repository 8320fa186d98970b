import LiveDispatchCore
import LiveDispatchTracing
import LiveDispatchWorker
import Testing

@Suite("Tracing configuration")
struct TracingConfigurationTests {
    @Test("tracing is off by default and the tracing: section turns it on")
    func section() throws {
        #expect(try WorkerConfiguration.parse(yaml: "{}", file: "t.yaml").traceSampler == nil)
        let configuration = try WorkerConfiguration.parse(yaml: """
            tracing:
              enabled: true
              endpoint: http://collector:4318/v1/traces
              service_name: scores-worker
              sampler: traceidratio
              sampling_ratio: 0.25
              apns_token_ratio: 0.5
              queue_size: 100
              export_interval: 200ms
            """, file: "t.yaml")
        #expect(configuration.tracing.endpoint == "http://collector:4318/v1/traces")
        #expect(configuration.tracing.serviceName == "scores-worker")
        #expect(configuration.tracing.apnsTokenRatio == 0.5)
        #expect(configuration.tracing.queueSize == 100)
        #expect(configuration.tracing.exportInterval == 0.2)
        #expect(configuration.traceSampler == TraceSampler(ratio: 0.25, followsParent: false))
    }

    @Test("the OTEL_* variables turn tracing on, and LIVEDISPATCH_TRACING_* win over them")
    func openTelemetryEnvironment() throws {
        let base = try WorkerConfiguration.parse(yaml: "{}", file: "t.yaml", environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://agent:4318/", "OTEL_TRACES_SAMPLER": "parentbased_always_on",
            "OTEL_SERVICE_NAME": "owls",
        ])
        #expect(base.tracing.enabled)
        #expect(base.tracing.endpoint == "http://agent:4318/v1/traces")
        #expect(base.tracing.serviceName == "owls")
        #expect(base.traceSampler == TraceSampler(ratio: 1, followsParent: true))

        let traces = try WorkerConfiguration.parse(yaml: "{}", file: "t.yaml", environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://agent:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom",
            "OTEL_TRACES_SAMPLER_ARG": "0.5", "LIVEDISPATCH_TRACING_SAMPLING_RATIO": "0.125",
        ])
        #expect(traces.tracing.endpoint == "http://traces:4318/custom")
        #expect(traces.tracing.samplingRatio == 0.125)

        let disabled = try WorkerConfiguration.parse(yaml: "tracing:\n  enabled: true\n", file: "t.yaml", environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://agent:4318", "OTEL_SDK_DISABLED": "true",
        ])
        #expect(!disabled.tracing.enabled)
        #expect(disabled.traceSampler == nil)
    }

    @Test("bad tracing values are reported with their position or variable")
    func problems() {
        do {
            _ = try WorkerConfiguration.parse(yaml: """
                tracing:
                  enabled: true
                  endpoint: https://collector:4318/v1/traces
                  sampling_ratio: 1.5
                  sampler: sometimes
                """, file: "t.yaml", environment: ["OTEL_TRACES_SAMPLER_ARG": "lots", "OTEL_SDK_DISABLED": "maybe"])
            Issue.record("the configuration loaded")
        } catch {
            #expect(error.problems.map(\.description) == [
                "t.yaml:4:19: tracing.sampling_ratio: expected a number from 0 to 1, got \"1.5\"",
                "t.yaml:5:12: tracing.sampler: expected one of \(TraceSampler.names.joined(separator: ", ")), got \"sometimes\"",
                "environment OTEL_TRACES_SAMPLER_ARG: tracing.sampling_ratio: expected a number from 0 to 1, got \"lots\"",
                "environment OTEL_SDK_DISABLED: tracing.enabled: expected true or false, got \"maybe\"",
                "t.yaml:3:13: tracing.endpoint: expected an OTLP/HTTP URL http://host[:port]/path (plain HTTP: put a collector beside the worker for TLS), got \"https://collector:4318/v1/traces\"",
            ])
        }
    }

    @Test("an endpoint nobody uses is not checked while tracing is off")
    func offIsNotChecked() throws {
        let configuration = try WorkerConfiguration.parse(yaml: "tracing:\n  endpoint: nowhere\n", file: "t.yaml")
        #expect(!configuration.tracing.enabled)
    }
}
