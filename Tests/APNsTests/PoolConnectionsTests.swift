import LiveDispatchCore
import Testing
@testable import APNs

/// The pool's connections sub-machine called directly: each connection's
/// life, stream limit, backoff, drain and idle pings, with no requests.
@Suite("Connection pool connections")
struct PoolConnectionsTests {
    typealias Connections = APNsConnectionPool.StateMachine.Connections

    static let t0: Double = 1_000_000

    func connections(idlePingInterval: Double = 600) -> Connections {
        Connections(configuration: .init(connections: 1, maxQueued: 1, idlePingInterval: idlePingInterval))
    }

    /// Adds `count` connections and makes each ready with `maxStreams`.
    func ready(_ connections: inout Connections, count: Int, maxStreams: Int = 100) {
        for _ in 0..<count {
            let id = connections.add()
            #expect(connections.established(id, now: Self.t0) == true)
            #expect(connections.settingsReceived(id, maxConcurrentStreams: maxStreams) == true)
        }
    }

    @Test func aConnectionCarriesOneStreamUntilAPushIsDelivered() {
        var connections = connections()
        ready(&connections, count: 1, maxStreams: 5)
        #expect(connections[0]?.limit == 1)
        connections.streamOpened(on: 0, now: Self.t0)
        #expect(connections.leastLoaded() == nil)
        connections.responseReceived(on: 0, delivered: false, now: Self.t0)
        #expect(connections[0]?.limit == 1)
        connections.responseReceived(on: 0, delivered: true, now: Self.t0)
        #expect(connections[0]?.limit == 5)
        #expect(connections.leastLoaded() == 0)
    }

    @Test func theLeastLoadedReadyConnectionTakesTheNextStreamLowestIDFirst() {
        var connections = connections()
        ready(&connections, count: 3)
        for id in 0..<3 { connections.responseReceived(on: id, delivered: true, now: Self.t0) }
        #expect(connections.leastLoaded() == 0)
        connections.streamOpened(on: 0, now: Self.t0)
        #expect(connections.leastLoaded() == 1)
        connections.streamOpened(on: 1, now: Self.t0)
        connections.streamOpened(on: 2, now: Self.t0)
        #expect(connections.leastLoaded() == 0)
        connections.streamClosed(on: 2)
        #expect(connections.leastLoaded() == 2)
        let connecting = connections.add()
        #expect(connections.leastLoaded() != connecting, "a connection still connecting takes no stream")
    }

    @Test func onlyAConnectingConnectionBecomesReady() {
        var connections = connections()
        let id = connections.add()
        #expect(connections.counts == [.connecting: 1, .ready: 0, .draining: 0, .backingOff: 0])
        #expect(connections.established(id, now: Self.t0) == true)
        #expect(connections.established(id, now: Self.t0) == false)
        #expect(connections.established(7, now: Self.t0) == false)
        #expect(connections.settingsReceived(7, maxConcurrentStreams: 10) == false)
        #expect(connections.counts[.ready] == 1)
    }

    @Test func failuresBackOffLongerAndSuccessForgetsThem() {
        var connections = connections()
        let id = connections.add()
        #expect(connections.failed(id, error: "refused", jitter: 1) == [.scheduleReconnect(id, delay: 0.1)])
        #expect(connections.lastError == "refused")
        #expect(connections.reconnectDue(id) == [.createConnection(id)])
        #expect(connections.reconnectDue(id) == [], "only a connection backing off reconnects")
        #expect(connections.failed(id, error: "refused", jitter: 1) == [.scheduleReconnect(id, delay: 0.2)])
        _ = connections.reconnectDue(id)
        #expect(connections.established(id, now: Self.t0) == true)
        #expect(connections.lastError == nil)
        var actions: [APNsConnectionPool.StateMachine.Action] = []
        connections.closed(id, jitter: 1, into: &actions)
        #expect(actions == [.scheduleReconnect(id, delay: 0.1)])
        #expect(connections[id]?.state == .backingOff)
    }

    @Test func aConnectionLostBeforeItWasReadyBacksOffFurther() {
        var connections = connections()
        let id = connections.add()
        _ = connections.failed(id, error: "refused", jitter: 1)
        _ = connections.reconnectDue(id)
        var actions: [APNsConnectionPool.StateMachine.Action] = []
        connections.closed(id, jitter: 1, into: &actions)
        #expect(actions == [.scheduleReconnect(id, delay: 0.2)])
    }

    @Test func aDrainedConnectionIsReplacedAndClosesOnceEmpty() {
        var connections = connections()
        ready(&connections, count: 1)
        connections.streamOpened(on: 0, now: Self.t0)
        var actions: [APNsConnectionPool.StateMachine.Action] = []
        connections.drain(0, into: &actions)
        #expect(actions == [.createConnection(1)])
        connections.drain(0, into: &actions)
        #expect(actions == [.createConnection(1)], "draining twice opens one replacement")
        connections.streamClosed(on: 0)
        connections.closeIfDrained(0, into: &actions)
        #expect(actions == [.createConnection(1), .closeConnection(0)])
        connections.closed(0, jitter: 1, into: &actions)
        #expect(connections[0] == nil)
        #expect(connections.ids == [1])
    }

    @Test func idleReadyConnectionsArePingedAtTheirInterval() {
        var connections = connections(idlePingInterval: 10)
        ready(&connections, count: 2)
        #expect(connections.nextPing == Self.t0 + 10)
        connections.streamOpened(on: 0, now: Self.t0 + 5)
        #expect(connections.nextPing == Self.t0 + 10, "a connection with a stream open is not idle")
        var actions: [APNsConnectionPool.StateMachine.Action] = []
        connections.pingIdle(now: Self.t0 + 9, into: &actions)
        #expect(actions == [])
        connections.pingIdle(now: Self.t0 + 10, into: &actions)
        #expect(actions == [.ping(1)])
        #expect(connections.nextPing == Self.t0 + 20)
        connections.streamClosed(on: 0)
        #expect(connections.nextPing == Self.t0 + 15)
    }

    @Test func shutdownDrainsEveryConnectionAndDropsThoseBackingOff() {
        var connections = connections()
        ready(&connections, count: 2)
        connections.streamOpened(on: 1, now: Self.t0)
        let failing = connections.add()
        _ = connections.failed(failing, error: "refused", jitter: 1)
        var actions: [APNsConnectionPool.StateMachine.Action] = []
        connections.shutdown(into: &actions)
        #expect(actions == [.closeConnection(0)])
        #expect(connections.ids == [0, 1])
        #expect(connections.reconnectDue(failing) == [])
        connections.drain(1, into: &actions)
        #expect(actions == [.closeConnection(0)], "no replacement after shutdown")
        connections.closed(0, jitter: 1, into: &actions)
        connections.closed(1, jitter: 1, into: &actions)
        #expect(connections.isEmpty)
        #expect(actions == [.closeConnection(0)])
    }
}
