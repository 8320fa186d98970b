@testable import LiveDispatchHTTP
import LiveDispatchCore
import Testing

/// The main listener's fairness, decided without a socket: per-address
/// caps, who is closed when the listener is full, and shorter timeouts
/// under pressure.
@Suite("Connection admission")
struct ConnectionAdmissionTests {
    let start = ContinuousClock.now

    func machine(max: Int = 8, perAddress: Int = 3) -> ConnectionAdmission {
        ConnectionAdmission(limits: .init(maxConnections: max, maxPerAddress: perAddress, headerTimeout: .seconds(10), requestTimeout: .seconds(30)))
    }

    @Test("one address holds at most its share; others still get in, and a closed connection frees its share")
    func perAddressCap() {
        var admission = machine()
        for id in 0..<3 {
            guard case .accept = admission.opened(id, address: "127.0.0.2", at: start) else {
                Issue.record("connection \(id) within the share was refused")
                return
            }
        }
        // The cheap look before a connection is set up says the same.
        #expect(!admission.hasRoom(for: "127.0.0.2") && admission.hasRoom(for: "127.0.0.1"))
        #expect(admission.opened(3, address: "127.0.0.2", at: start) == .refuse(address: "127.0.0.2", held: 3))
        guard case .accept = admission.opened(4, address: "127.0.0.1", at: start) else {
            Issue.record("another address was refused")
            return
        }
        admission.closed(0)
        guard case .accept = admission.opened(5, address: "127.0.0.2", at: start) else {
            Issue.record("a freed share was not given back")
            return
        }
        #expect(admission.perAddress["127.0.0.2"] == 3 && admission.perAddress["127.0.0.1"] == 1)
        // A refused connection was never counted, and closing it changes nothing.
        admission.closed(3)
        #expect(admission.connections.count == 4)
    }

    @Test("more than half of the slots taken: heads get 2 s and bodies 10 s; below it, the configured timeouts")
    func pressure() {
        var admission = machine(max: 8, perAddress: 8)
        for id in 0..<4 { _ = admission.opened(id, address: "a\(id)", at: start) }
        #expect(admission.timeouts == .init(header: .seconds(10), request: .seconds(30)))
        #expect(admission.opened(4, address: "a4", at: start) == .accept(.init(header: .seconds(2), request: .seconds(10)), close: []))
        #expect(admission.underPressure)
        admission.closed(4)
        #expect(admission.timeouts == .init(header: .seconds(10), request: .seconds(30)))
    }

    @Test("when the last slot is taken, the kept-alive connection idle longest is closed first, then the fresh one waiting longest; busy ones never")
    func fullListener() {
        var admission = machine(max: 4, perAddress: 4)
        _ = admission.opened(0, address: "a", at: start)  // fresh, oldest
        _ = admission.opened(1, address: "b", at: start + .seconds(1))
        admission.requestStarted(1)
        #expect(admission.responded(1, at: start + .seconds(2)).isEmpty)  // kept alive, idle
        _ = admission.opened(2, address: "c", at: start + .seconds(3))
        admission.requestStarted(2)  // busy
        // The fourth fills the listener: the idle kept-alive connection makes room.
        #expect(admission.opened(3, address: "d", at: start + .seconds(4)) == .accept(.init(header: .seconds(2), request: .seconds(10)), close: [1]))
        #expect(admission.connections[1] == nil && admission.perAddress["b"] == nil)
        // Full again: no kept-alive one left, so the fresh one waiting longest.
        #expect(admission.opened(4, address: "e", at: start + .seconds(5)) == .accept(.init(header: .seconds(2), request: .seconds(10)), close: [0]))
        admission.requestStarted(3)
        admission.requestStarted(4)
        // Every other connection is busy: nothing to close, the newcomer included.
        #expect(admission.opened(5, address: "f", at: start + .seconds(6)) == .accept(.init(header: .seconds(2), request: .seconds(10)), close: []))
        // A connection kept alive while the listener is full is closed at once.
        #expect(admission.responded(2, at: start + .seconds(7)) == [2])
    }

    @Test("a randomized run keeps the counts true: per address, in all, never over a share")
    func randomized() {
        var random = SplitMix64(seed: 47)
        var admission = machine(max: 16, perAddress: 5)
        var open: Set<Int> = []
        var now = start
        for id in 0..<2_000 {
            now = now + .milliseconds(Int64(random.next() % 100))
            switch random.next() % 4 {
            case 0, 1:
                if case .accept(_, let close) = admission.opened(id, address: "10.0.0.\(random.next() % 4)", at: now) {
                    open.insert(id)
                    open.subtract(close)
                }
            case 2:
                if let id = open.randomElement(using: &random) { admission.requestStarted(id) }
            default:
                if let id = open.randomElement(using: &random) {
                    if random.next() % 2 == 0 {
                        admission.closed(id)
                        open.remove(id)
                    } else {
                        open.subtract(admission.responded(id, at: now))
                    }
                }
            }
            #expect(Set(admission.connections.keys) == open)
            #expect(admission.perAddress.values.allSatisfy { $0 <= 5 && $0 > 0 })
            #expect(admission.perAddress.values.reduce(0, +) == open.count)
        }
    }
}
