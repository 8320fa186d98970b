import Crypto
import LiveDispatchCore
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import APNsSimulator

/// The connection handler on an `EmbeddedChannel` (no TLS), talking to an
/// nghttp2 client whose bytes the test carries back and forth.
@Suite("APNs connection handler")
struct APNsConnectionHandlerTests {
    static let now: Double = 1_764_000_000
    static let token = String(repeating: "5e", count: 32)
    static let payload = Array(#"{"aps":{"event":"update","timestamp":1764000000,"content-state":{"n":1}}}"#.utf8)

    /// A handler on an embedded channel and a client talking to it.
    final class Harness {
        let key = P256.Signing.PrivateKey()
        let channel: EmbeddedChannel
        let client = TestHTTP2Client()
        let state: SimulatorState
        /// One provider token for the connection, as a client keeps it.
        let jwt: String

        init(maxStreams: UInt32 = 100, faults: SimulatorFaults = SimulatorFaults()) throws {
            state = SimulatorState(faults: faults, recorder: try PushRecorder(historyLimit: 100, recordFile: nil))
            let rules = APNsRequestRules(
                bundleID: TestProviderToken.bundleID,
                verifier: ProviderTokenVerifier(
                    teamID: TestProviderToken.teamID, keyID: TestProviderToken.keyID, publicKey: key.publicKey),
                tokenUpdateInterval: 1200)
            let handler = APNsConnectionHandler(
                rules: rules, maxConcurrentStreams: maxStreams, initialMaxConcurrentStreams: 1, state: state,
                clock: { APNsConnectionHandlerTests.now }, logger: Logger(label: "test"))
            jwt = try TestProviderToken.make(key: key, issuedAt: Int64(APNsConnectionHandlerTests.now))
            channel = EmbeddedChannel(handler: handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        }

        func submit(topic: String = "\(TestProviderToken.bundleID).push-type.liveactivity") throws -> Int32 {
            client.submit(
                headers: [
                    (":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                    (":path", "/3/device/\(APNsConnectionHandlerTests.token)"), ("authorization", "bearer \(jwt)"),
                    ("apns-push-type", "liveactivity"), ("apns-topic", topic), ("apns-priority", "10"),
                ],
                body: APNsConnectionHandlerTests.payload)
        }

        /// Moves bytes both ways until neither side has anything to say.
        func exchange() throws {
            var quiet = false
            while !quiet {
                quiet = true
                let outgoing = client.output()
                if !outgoing.isEmpty {
                    quiet = false
                    try channel.writeInbound(channel.allocator.buffer(bytes: outgoing))
                }
                while let incoming = try channel.readOutbound(as: ByteBuffer.self) {
                    quiet = false
                    client.receive(Array(incoming.readableBytesView))
                }
            }
        }

        var connection: ConnectionSnapshot? { state.snapshots.first }
    }

    @Test("one stream until the first push succeeds, then the configured limit; the pushes are recorded")
    func firstPushRaisesLimit() throws {
        let harness = try Harness(maxStreams: 8)
        let first = try harness.submit()
        try harness.exchange()
        #expect(harness.client.response(first)?.status == 200)
        #expect(harness.client.remoteMaxConcurrentStreams == 8)
        let streams = try (0..<12).map { _ in try harness.submit() }
        try harness.exchange()
        #expect(streams.allSatisfy { harness.client.response($0)?.status == 200 })
        #expect(harness.state.recorder.summary(for: Self.token)?.count == 13)
        let connection = try #require(harness.connection)
        #expect(connection.peakConcurrentStreams >= 1)
        #expect(connection.peakConcurrentStreams <= 8)
        #expect(connection.limitViolations == 0)
        #expect(connection.announcedMaxConcurrentStreams == 8)
    }

    @Test("added latency holds responses until the loop's time passes")
    func latency() throws {
        let harness = try Harness(faults: SimulatorFaults(latencyMilliseconds: 250))
        let stream = try harness.submit()
        try harness.exchange()
        #expect(harness.client.response(stream)?.status == nil)
        harness.channel.embeddedEventLoop.advanceTime(by: .milliseconds(249))
        try harness.exchange()
        #expect(harness.client.response(stream)?.status == nil)
        harness.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        try harness.exchange()
        #expect(harness.client.response(stream)?.status == 200)
        #expect(harness.state.recorder.acceptedCount == 1)
    }

    @Test("GOAWAY after 3 streams: streams above the last id get no answer and the connection closes")
    func goAway() throws {
        let harness = try Harness(faults: SimulatorFaults(goAwayAfterStreams: 3))
        let first = try harness.submit()
        try harness.exchange()  // the limit rises after the first push
        let more = try (0..<4).map { _ in try harness.submit() }
        try harness.exchange()
        let goAway = try #require(harness.client.goAway)
        #expect(goAway.errorCode == 0)
        #expect(goAway.lastStreamID == more[1])
        #expect(harness.client.response(first)?.status == 200)
        #expect(harness.client.response(more[0])?.status == 200)
        #expect(harness.client.response(more[1])?.status == 200)
        #expect(harness.client.response(more[2])?.status == nil)
        #expect(harness.client.response(more[3])?.status == nil)
        #expect(harness.state.recorder.acceptedCount == 3)
        #expect(!harness.channel.isActive)
    }

    @Test("after a rejection the limit drops to one and the other pending streams are refused")
    func dropToOne() throws {
        let harness = try Harness(
            maxStreams: 10, faults: SimulatorFaults(latencyMilliseconds: 100, dropToOneStreamAfterRejection: true))
        let first = try harness.submit()
        try harness.exchange()
        harness.channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        try harness.exchange()
        #expect(harness.client.response(first)?.status == 200)
        #expect(harness.client.remoteMaxConcurrentStreams == 10)
        let good = try harness.submit()
        let bad = try harness.submit(topic: "com.example.sports")
        let later = try harness.submit()
        try harness.exchange()
        #expect(harness.client.remoteMaxConcurrentStreams == 1)
        #expect(harness.client.resets[good] == 7)
        #expect(harness.client.resets[later] == 7)
        harness.channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        try harness.exchange()
        #expect(harness.client.response(bad)?.status == 400)
        #expect(harness.state.recorder.acceptedCount == 1)
    }

    @Test("a reset closes the connection with requests unanswered")
    func reset() throws {
        let harness = try Harness(faults: SimulatorFaults(resetConnectionAfterRequests: 2))
        let first = try harness.submit()
        try harness.exchange()
        let second = try harness.submit()
        let third = try harness.submit()
        try harness.exchange()
        #expect(harness.client.response(first)?.status == 200)
        #expect(harness.client.response(second)?.status == nil)
        #expect(harness.client.response(third)?.status == nil)
        #expect(!harness.channel.isActive)
        #expect(harness.connection?.isOpen == false)
    }

    @Test("streams opened before the client learns the limit are refused, not counted as violations")
    func openedBeforeSettings() throws {
        let harness = try Harness(maxStreams: 8)
        let streams = try (0..<3).map { _ in try harness.submit() }
        try harness.exchange()
        #expect(harness.client.response(streams[0])?.status == 200)
        #expect(harness.client.resets[streams[1]] == 7)
        #expect(harness.client.resets[streams[2]] == 7)
        #expect(harness.connection?.limitViolations == 0)
    }

    @Test("a provider token changed on the same connection within 20 minutes is refused 429")
    func tokenChurn() throws {
        let harness = try Harness()
        let first = try harness.submit()
        try harness.exchange()
        let other = try TestProviderToken.make(key: harness.key, issuedAt: Int64(APNsConnectionHandlerTests.now))
        let second = harness.client.submit(
            headers: [
                (":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                (":path", "/3/device/\(Self.token)"), ("authorization", "bearer \(other)"),
                ("apns-push-type", "liveactivity"), ("apns-topic", "\(TestProviderToken.bundleID).push-type.liveactivity"),
            ],
            body: Self.payload)
        try harness.exchange()
        #expect(harness.client.response(first)?.status == 200)
        #expect(harness.client.response(second)?.status == 429)
        #expect(String(decoding: harness.client.response(second)?.body ?? [], as: UTF8.self) == #"{"reason":"TooManyProviderTokenUpdates"}"#)
    }

    @Test("a seeded error rate fails the same requests of an arrival order, run after run; another seed fails others")
    func seededErrorRate() throws {
        func statuses(seed: UInt64) throws -> [Int] {
            let harness = try Harness(faults: SimulatorFaults(errorRate: 0.3, errorStatuses: [429, 500, 503], seed: seed))
            return try (0..<60).map { _ in
                let stream = try harness.submit()
                try harness.exchange()
                return harness.client.response(stream)?.status ?? 0
            }
        }
        let first = try statuses(seed: 45)
        #expect(try statuses(seed: 45) == first)
        #expect(try statuses(seed: 46) != first)
        let failed = first.filter { $0 != 200 }
        #expect(failed.count >= 9 && failed.count <= 27, "\(failed.count) of 60 failed at a rate of 0.3")
        #expect(Set(failed).isSubset(of: [429, 500, 503]) && !first.contains(0))
        // The draws are the seed's generator's, one per request over the server.
        var generator = SplitMix64(seed: 45)
        let expected = (1...60).map { _ in generator.unit() < 0.3 }
        #expect(first.map { $0 != 200 } == expected)
    }

    @Test("garbage instead of an HTTP/2 preface closes the connection")
    func garbage() throws {
        let harness = try Harness()
        try harness.channel.writeInbound(harness.channel.allocator.buffer(string: "GET / HTTP/1.1\r\n\r\n"))
        #expect(!harness.channel.isActive)
    }
}
