import APNs
import Crypto
import LiveDispatchCore
@testable import LiveDispatchWorker
import Logging
import Synchronization
import Testing

/// `apns.endpoint: simulator` sends to the APNs server the worker's caller
/// starts in its process (the demo's simulator), and to nothing else.
@Suite("In-process APNs server")
struct InProcessAPNsTests {
    let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("without a server from the caller, apns.endpoint: simulator is refused")
    func refusedWithoutAServer() async {
        await #expect(throws: WorkerStartError.self) {
            _ = try await Worker.makeSender(WorkerConfiguration(), inProcessAPNs: nil, logger: logger)
        }
    }

    @Test("the server is started once, for the worker's configuration, and every app with a key gets a route in both environments")
    func routesGoToTheServer() async throws {
        var configuration = WorkerConfiguration()
        configuration.apps = [
            WorkerConfiguration.App(name: "scores", bundleID: "com.example.scores"),
            WorkerConfiguration.App(name: "orders", bundleID: "com.example.orders"),
        ]
        let started = Mutex<[String]>([])
        let key = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "KEY0000001", teamID: "TEAM000001")
        let (sender, server) = try await Worker.makeSender(
            configuration,
            inProcessAPNs: { configuration, _ in
                started.withLock { $0 += configuration.resolvedApps.map(\.name) }
                return InProcessAPNs(
                    endpoint: .init(host: "127.0.0.1", port: 2197, serverName: "localhost"), trustRoots: [],
                    signingKeys: ["scores": key], stop: {})
            },
            logger: logger)
        #expect(started.withLock { $0 } == ["scores", "orders"])
        #expect(server?.endpoint.port == 2197)
        #expect(Set(sender.routes.keys) == [.init(app: "scores", environment: .production), .init(app: "scores", environment: .sandbox)])
        await sender.shutdown()
    }
}
