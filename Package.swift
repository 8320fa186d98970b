// swift-tools-version:6.1
import PackageDescription

/// Every target is built in Swift 6 language mode, which implies complete
/// strict concurrency checking.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "LiveDispatch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "livedispatch", targets: ["livedispatch"]),
        .executable(name: "livedispatch-bench", targets: ["livedispatch-bench"]),
        .library(name: "LiveDispatchCore", targets: ["LiveDispatchCore"]),
        .executable(name: "livedispatch-fuzz", targets: ["LiveDispatchFuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // C boundaries: system libraries found by pkg-config.
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),

        // Domain values and the pure state machines.
        .target(
            name: "LiveDispatchCore",
            swiftSettings: swiftSettings
        ),

        // Rule files: parse, validate with positions, compile, evaluate.
        .target(
            name: "LiveDispatchRules",
            dependencies: [
                "LiveDispatchCore",
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),

        // An APNs imitation over HTTP/2 + TLS for tests, the demo and benchmarks.
        .target(
            name: "APNsSimulator",
            dependencies: [
                "CNghttp2",
                "LiveDispatchCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // The APNs client: HTTP/2 connection pool on nghttp2 + NIO + NIOSSL, JWT, response classification.
        .target(
            name: "APNs",
            dependencies: [
                "LiveDispatchCore",
                "CNghttp2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),

        // Kafka through librdkafka: producer, group consumer, metadata, embedded mock cluster.
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // Tracing: the Tracer of swift-distributed-tracing, W3C trace context,
        // sampling and an OTLP/HTTP protobuf exporter over SwiftNIO, through a
        // small HTTP/1.1 client (plain or TLS) the outcome webhooks share.
        .target(
            name: "LiveDispatchTracing",
            dependencies: [
                "LiveDispatchCore",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // Services and wiring: router, dispatcher, stores, configuration, admin HTTP.
        .target(
            name: "LiveDispatchWorker",
            dependencies: [
                .target(name: "CMalloc", condition: .when(platforms: [.linux])),
                "LiveDispatchCore",
                "LiveDispatchTracing",
                "LiveDispatchRules",
                "Kafka",
                "APNs",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),

        // The worker's HTTP server (Hummingbird): health, metrics, status, the
        // ingest and read API generated from openapi.yaml (scripts/generate-openapi)
        // and the web console.
        .target(
            name: "LiveDispatchHTTP",
            dependencies: [
                "LiveDispatchCore",
                "LiveDispatchRules",
                "LiveDispatchWorker",
                "LiveDispatchTracing",
                "Kafka",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The web console, compiled into the binary (no files to ship beside it).
            resources: [
                .embedInCode("Console/index.html"),
                .embedInCode("Console/console.css"),
                .embedInCode("Console/console.js"),
            ],
            swiftSettings: swiftSettings
        ),

        // The demo around a worker (`livedispatch run`): the in-process APNs
        // simulator, the scenario replay and the console's Lock Screens.
        .target(
            name: "LiveDispatchDemo",
            dependencies: [
                "LiveDispatchCore",
                "LiveDispatchWorker",
                "Kafka",
                "APNs",
                "APNsSimulator",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // What the benchmarks judge with and read through, apart from their
        // commands: delivery audits, resident-set series, the simulator's
        // push record, CPU clocks.
        .target(
            name: "LiveDispatchBench",
            dependencies: ["LiveDispatchCore", "Kafka"],
            swiftSettings: swiftSettings
        ),

        // What the benchmarks and the tests share: waiting with a deadline,
        // free ports.
        .target(
            name: "LiveDispatchTesting",
            dependencies: ["LiveDispatchCore"],
            swiftSettings: swiftSettings
        ),

        // One HTTP/1.1 request to a worker's listener, for both command-line tools.
        .target(
            name: "PlainHTTP",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // The command-line tool: what operators and rule authors run.
        .executableTarget(
            name: "livedispatch",
            dependencies: [
                "LiveDispatchCore",
                "LiveDispatchRules",
                "LiveDispatchWorker",
                "LiveDispatchHTTP",
                "LiveDispatchDemo",
                "LiveDispatchBench",
                "LiveDispatchTracing",
                "Kafka",
                "APNs",
                "APNsSimulator",
                "PlainHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // The benchmarks (`livedispatch-bench`): load generators that run
        // `livedispatch` beside them as child processes and print figures.
        .executableTarget(
            name: "livedispatch-bench",
            dependencies: [
                "LiveDispatchCore",
                "LiveDispatchTesting",
                "LiveDispatchRules",
                "LiveDispatchWorker",
                "LiveDispatchDemo",
                "LiveDispatchTracing",
                "LiveDispatchBench",
                "Kafka",
                "APNs",
                "APNsSimulator",
                "PlainHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Only to measure the APNs client against it (`apns --compare-async-http-client`).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),

        // libFuzzer targets (`scripts/fuzz` builds them with -sanitize=fuzzer,address
        // and -DFUZZING); built plainly, it replays corpora through the same code.
        .executableTarget(
            name: "LiveDispatchFuzz",
            dependencies: [
                "LiveDispatchCore", "LiveDispatchRules", "LiveDispatchWorker", "LiveDispatchHTTP", "LiveDispatchTracing", "APNs",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),

        // What the test targets share: child processes with their output, a
        // worker's readiness, and LiveDispatchTesting (waiting, free ports).
        .target(
            name: "TestSupport",
            dependencies: ["LiveDispatchCore", "LiveDispatchTesting"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchCoreTests",
            dependencies: ["LiveDispatchCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchTracingTests",
            dependencies: [
                "LiveDispatchTracing", "LiveDispatchCore", "TestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchDemoTests",
            dependencies: ["LiveDispatchDemo", "LiveDispatchCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchBenchTests",
            dependencies: ["LiveDispatchBench"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchRulesTests",
            dependencies: ["LiveDispatchRules", "LiveDispatchCore"],
            resources: [.copy("Broken")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: [
                "APNsSimulator",
                "CNghttp2",
                "LiveDispatchCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "TestSupport",
                "APNs",
                "APNsSimulator",
                "LiveDispatchCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KafkaTests",
            dependencies: [
                "TestSupport",
                "Kafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchWorkerTests",
            dependencies: [
                "LiveDispatchWorker", "LiveDispatchCore", "LiveDispatchTracing", "APNs", "APNsSimulator", "Kafka", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LiveDispatchHTTPTests",
            dependencies: [
                "LiveDispatchHTTP", "LiveDispatchWorker", "LiveDispatchCore", "LiveDispatchRules", "LiveDispatchTracing", "Kafka", "TestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "TestSupport",
                "LiveDispatchCore", "APNsSimulator", "Kafka", "livedispatch", "livedispatch-bench", "LiveDispatchFuzz",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
