import APNsSimulator
import Foundation
import LiveDispatchCore
import Logging
import Testing
@testable import APNs

/// The channel management client and broadcast sends against the
/// simulator over TLS: one port serves both APIs.
@Suite("Broadcast channels against the APNs simulator")
struct BroadcastChannelTests {
    let harness = SimulatorTests()

    func start(channelLimit: Int = 10_000) async throws -> (APNsSimulator, APNsConnectionPool, BroadcastChannelClient) {
        let configuration = APNsSimulator.Configuration(
            teamID: testKey.teamID, keyID: testKey.keyID, publicKey: testKey.privateKey.publicKey,
            bundleID: SimulatorTests.bundleID, threads: 1, channelLimit: channelLimit)
        let simulator = try await APNsSimulator.start(
            configuration: configuration, logger: Logger(label: "simulator") { _ in SwiftLogNoOpLogHandler() })
        let pool = try harness.makePool(simulator, connections: 1)
        return (simulator, pool, BroadcastChannelClient(pool: pool, bundleID: SimulatorTests.bundleID))
    }

    func broadcast(
        _ channelID: String, event: String = "update", expiration: Double? = nil, payload: String? = nil
    ) -> APNsRequest {
        let body = payload ?? #"{"aps":{"event":"\#(event)","timestamp":1764000000,"content-state":{"score":1}}}"#
        return APNsRequest(
            destination: .channel(channelID), bundleID: SimulatorTests.bundleID, priority: .immediate,
            expiration: expiration.map(UnixTime.init(seconds:)), apnsID: UUID().uuidString.lowercased(),
            payload: Array(body.utf8))
    }

    @Test("create, read, list and delete a channel; a deleted channel is not registered")
    func lifecycle() async throws {
        let (simulator, pool, client) = try await start()
        let stored = try await client.create(storagePolicy: .mostRecent)
        let fleeting = try await client.create(storagePolicy: .noStorage)
        #expect(stored != fleeting)
        #expect(try await client.list() == [stored, fleeting])
        #expect(simulator.channelIDs == [stored, fleeting])
        #expect(try await client.read(channelID: stored).storagePolicy == .mostRecent)
        #expect(try await client.read(channelID: fleeting).storagePolicy == .noStorage)

        try await client.delete(channelID: stored)
        #expect(try await client.list() == [fleeting])
        await #expect(throws: BroadcastChannelError.self) { try await client.read(channelID: stored) }
        do {
            try await client.delete(channelID: stored)
            Issue.record("deleting a deleted channel succeeded")
        } catch {
            #expect(error.status == 404)
            #expect(error.reason == "ChannelNotRegistered")
            #expect(!error.isRetryable)
            #expect(error.message.contains("does not exist"))
        }
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test("past the channel limit APNs refuses creation with CannotCreateChannelConfig")
    func limit() async throws {
        let (simulator, pool, client) = try await start(channelLimit: 2)
        _ = try await client.create(storagePolicy: .noStorage)
        let second = try await client.create(storagePolicy: .noStorage)
        do {
            _ = try await client.create(storagePolicy: .noStorage)
            Issue.record("a third channel was created past a limit of 2")
        } catch {
            #expect(error.status == 400)
            #expect(error.reason == "CannotCreateChannelConfig")
        }
        try await client.delete(channelID: second)
        _ = try await client.create(storagePolicy: .mostRecent)
        #expect(simulator.channelIDs.count == 2)
        await pool.shutdown()
        try await simulator.stop()
    }

    @Test("a broadcast reaches its channel and is counted; starts, unknown channels and stored no-storage pushes are refused")
    func broadcasts() async throws {
        let (simulator, pool, client) = try await start()
        let stored = try await client.create(storagePolicy: .mostRecent)
        let fleeting = try await client.create(storagePolicy: .noStorage)

        let update = broadcast(stored, expiration: 1_764_003_600)
        #expect(await pool.send(update) == .delivered(apnsID: update.apnsID))
        #expect(isDelivered(await pool.send(broadcast(stored, event: "end", expiration: 1_764_003_600))))
        #expect(isDelivered(await pool.send(broadcast(fleeting))))
        #expect(simulator.broadcasts[stored]?.count == 2)
        #expect(simulator.broadcasts[stored]?.last.payloadJSON?["aps"]?["event"]?.stringValue == "end")
        #expect(simulator.broadcasts[stored]?.last.headers["apns-topic"] == nil)
        #expect(simulator.broadcasts[fleeting]?.count == 1)
        #expect(simulator.tokens.isEmpty)

        #expect(await pool.send(broadcast(fleeting, expiration: 1_764_003_600)) == .permanent(status: 400, reason: .badExpirationDate))
        #expect(await pool.send(broadcast(stored, event: "start")) == .permanent(status: 400, reason: APNsReason("BadPayload")))
        let unknown = "AAAAAAAAAAAAAAAAAAAAAA=="
        #expect(await pool.send(broadcast(unknown)) == .permanent(status: 404, reason: APNsReason("ChannelNotRegistered")))
        #expect(await pool.send(broadcast("not a channel!")) == .permanent(status: 400, reason: APNsReason("BadChannelId")))
        let large = #"{"aps":{"event":"update","timestamp":1,"content-state":{"x":""# + String(repeating: "a", count: 5100) + #""}}}"#
        #expect(await pool.send(broadcast(stored, payload: large)) == .permanent(status: 413, reason: .payloadTooLarge))
        // Between the device limit (4096) and the broadcast limit (5120): accepted.
        let between = #"{"aps":{"event":"update","timestamp":1,"content-state":{"x":""# + String(repeating: "a", count: 4500) + #""}}}"#
        #expect(isDelivered(await pool.send(broadcast(stored, payload: between))))
        #expect(simulator.broadcasts[stored]?.count == 3)
        await pool.shutdown()
        try await simulator.stop()
    }

    func isDelivered(_ outcome: APNsOutcome) -> Bool {
        if case .delivered = outcome { return true }
        return false
    }
}
