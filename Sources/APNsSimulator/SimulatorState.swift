import NIOCore
import Synchronization

/// What the simulator knows about one connection, for tests to assert on.
public struct ConnectionSnapshot: Sendable, Hashable {
    /// From 1, in order of acceptance.
    public var id: Int
    /// The most streams open at once.
    public var peakConcurrentStreams: Int
    public var streamsOpened: Int
    public var requestsReceived: Int
    /// The `SETTINGS_MAX_CONCURRENT_STREAMS` last announced.
    public var announcedMaxConcurrentStreams: Int
    /// Streams the client opened beyond a limit it had acknowledged (nghttp2
    /// answers those with GOAWAY PROTOCOL_ERROR, which is counted too).
    public var limitViolations: Int
    public var isOpen: Bool
}

/// The state shared by every connection of one simulator: faults (which
/// tests may change while it runs), the request sequence, the recorder and
/// the connection statistics.
final class SimulatorState: Sendable {
    let recorder: PushRecorder
    private let faultsBox: Mutex<SimulatorFaults>
    private let sequence = Atomic<Int>(0)
    private let connectionIDs = Atomic<Int>(0)
    private let connections = Mutex<[Int: ConnectionSnapshot]>([:])
    private let channels = Mutex<[Int: any Channel]>([:])
    private let broadcastChannels: Mutex<ChannelRegistry>

    init(faults: SimulatorFaults, recorder: PushRecorder, channelLimit: Int = ChannelRegistry.appleLimit) {
        self.faultsBox = Mutex(faults)
        self.recorder = recorder
        self.broadcastChannels = Mutex(ChannelRegistry(limit: channelLimit))
    }

    /// Runs `body` on the broadcast channels under their lock.
    func withChannels<Result>(_ body: (inout ChannelRegistry) -> Result) -> Result {
        broadcastChannels.withLock { body(&$0) }
    }

    var faults: SimulatorFaults {
        get { faultsBox.withLock { $0 } }
        set { faultsBox.withLock { $0 = newValue } }
    }

    func updateFaults(_ change: (inout SimulatorFaults) -> Void) {
        faultsBox.withLock { change(&$0) }
    }

    /// The next server-wide request number, from 1.
    func nextSequence() -> Int { sequence.wrappingAdd(1, ordering: .relaxed).newValue }

    func register(channel: any Channel, announcedMaxStreams: Int) -> Int {
        let id = connectionIDs.wrappingAdd(1, ordering: .relaxed).newValue
        channels.withLock { $0[id] = channel }
        connections.withLock {
            $0[id] = ConnectionSnapshot(
                id: id, peakConcurrentStreams: 0, streamsOpened: 0, requestsReceived: 0,
                announcedMaxConcurrentStreams: announcedMaxStreams, limitViolations: 0,
                isOpen: true)
        }
        return id
    }

    func update(_ snapshot: ConnectionSnapshot) {
        connections.withLock { $0[snapshot.id] = snapshot }
    }

    func closed(connection id: Int) {
        channels.withLock { $0[id] = nil }
        connections.withLock { $0[id]?.isOpen = false }
    }

    var snapshots: [ConnectionSnapshot] {
        connections.withLock { $0.values.sorted { $0.id < $1.id } }
    }

    var openChannels: [any Channel] { channels.withLock { Array($0.values) } }
}
