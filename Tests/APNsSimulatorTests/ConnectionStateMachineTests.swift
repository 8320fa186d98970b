import Testing

@testable import APNsSimulator

@Suite("Simulated connection state machine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    static let token = String(repeating: "cd", count: 32)

    static func accepted(_ id: String = "id") -> APNsRequestRules.Verdict {
        .init(response: .success, deviceToken: token, apnsID: id, event: "update")
    }

    static func refused(_ reason: String = "BadTopic") -> APNsRequestRules.Verdict {
        .init(response: SimulatedResponse(status: 400, reason: reason), deviceToken: token, apnsID: "id")
    }

    static func ok(_ stream: Int32, delay: Int64 = 0) -> Machine.Action {
        .respond(stream: stream, response: .success, apnsID: "id", delayMilliseconds: delay)
    }

    @Test("one stream until a push succeeds, then the configured limit, announced once")
    func firstSuccessRaisesLimit() {
        var machine = Machine(configuredMaxStreams: 1000)
        let faults = SimulatorFaults()
        #expect(machine.announcedMaxStreams == 1)
        #expect(machine.streamOpened(1, faults: faults) == [])
        #expect(machine.requestReceived(1, verdict: Self.refused(), faults: faults, sequence: 1, draw: 0.5).count == 1)
        #expect(machine.announcedMaxStreams == 1)
        #expect(machine.streamClosed(1) == [])
        _ = machine.streamOpened(3, faults: faults)
        #expect(
            machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.5)
                == [.sendSettings(maxConcurrentStreams: 1000), Self.ok(3)])
        _ = machine.streamOpened(5, faults: faults)
        #expect(machine.requestReceived(5, verdict: Self.accepted(), faults: faults, sequence: 3, draw: 0.5) == [Self.ok(5)])
        #expect(machine.announcedMaxStreams == 1000)
    }

    @Test("peak concurrent streams and streams beyond an acknowledged limit are counted")
    func peakAndViolations() {
        var machine = Machine(configuredMaxStreams: 2)
        let faults = SimulatorFaults()
        _ = machine.streamOpened(1, faults: faults)
        _ = machine.streamOpened(3, faults: faults)  // before any ACK: allowed by HTTP/2
        #expect(machine.limitViolations == 0)
        #expect(machine.peakConcurrentStreams == 2)
        _ = machine.streamClosed(1)
        _ = machine.streamClosed(3)
        machine.settingsAcknowledged()  // the client now knows the limit is 1
        _ = machine.streamOpened(5, faults: faults)
        _ = machine.streamOpened(7, faults: faults)
        #expect(machine.limitViolations == 1)
        #expect(machine.peakConcurrentStreams == 2)
    }

    @Test("GOAWAY after N streams names the Nth stream; later streams are not answered; close when drained")
    func goAway() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(goAwayAfterStreams: 2)
        #expect(machine.streamOpened(1, faults: faults) == [])
        #expect(machine.streamOpened(3, faults: faults) == [.goAway(lastStreamID: 3)])
        #expect(machine.streamOpened(5, faults: faults) == [])
        #expect(machine.requestReceived(5, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.5) == [])
        #expect(machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.5).last == Self.ok(1))
        #expect(machine.streamClosed(1) == [])
        #expect(machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 3, draw: 0.5) == [Self.ok(3)])
        #expect(machine.streamClosed(3) == [.closeWhenFlushed])
        #expect(machine.phase == .closed)
    }

    @Test("every Nth request over the server is refused REFUSED_STREAM")
    func refuseEvery() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(refuseStreamEvery: 3)
        var refused: [Int32] = []
        for (index, stream) in stride(from: Int32(1), through: 11, by: 2).enumerated() {
            _ = machine.streamOpened(stream, faults: faults)
            let actions = machine.requestReceived(stream, verdict: Self.accepted(), faults: faults, sequence: index + 1, draw: 0.9)
            if actions == [.refuse(stream: stream)] { refused.append(stream) }
            _ = machine.streamClosed(stream)
        }
        #expect(refused == [5, 11])
    }

    @Test("the connection is reset when the Nth request arrives, and then answers nothing")
    func reset() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(resetConnectionAfterRequests: 2)
        _ = machine.streamOpened(1, faults: faults)
        _ = machine.streamOpened(3, faults: faults)
        _ = machine.streamOpened(5, faults: faults)
        #expect(machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.9).last == Self.ok(1))
        #expect(machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.9) == [.reset])
        #expect(machine.requestReceived(5, verdict: Self.accepted(), faults: faults, sequence: 3, draw: 0.9) == [])
        #expect(!machine.shouldRespond(5))
    }

    @Test("an error schedule cycles over accepted pushes; refused ones keep their own answer")
    func schedule() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(errorSchedule: [503, 200, 429])
        var statuses: [Int] = []
        for (index, stream) in stride(from: Int32(1), through: 11, by: 2).enumerated() {
            _ = machine.streamOpened(stream, faults: faults)
            for case .respond(_, let response, _, _) in machine.requestReceived(
                stream, verdict: Self.accepted(), faults: faults, sequence: index + 1, draw: 0.9)
            {
                statuses.append(response.status)
            }
        }
        #expect(statuses == [503, 200, 429, 503, 200, 429])
        _ = machine.streamOpened(13, faults: faults)
        let refused = machine.requestReceived(13, verdict: Self.refused("BadPriority"), faults: faults, sequence: 7, draw: 0.9)
        #expect(refused == [.respond(stream: 13, response: SimulatedResponse(status: 400, reason: "BadPriority"), apnsID: "id", delayMilliseconds: 0)])
    }

    @Test("an error rate picks the status from the draw; draws above the rate pass")
    func rate() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(errorRate: 0.3, errorStatuses: [429, 500, 503])
        func status(_ stream: Int32, _ draw: Double) -> Int? {
            _ = machine.streamOpened(stream, faults: faults)
            for case .respond(_, let response, _, _) in machine.requestReceived(
                stream, verdict: Self.accepted(), faults: faults, sequence: Int(stream), draw: draw)
            {
                return response.status
            }
            return nil
        }
        #expect(status(1, 0.05) == 429)
        #expect(status(3, 0.15) == 500)
        #expect(status(5, 0.25) == 503)
        #expect(status(7, 0.35) == 200)
        let response = SimulatedResponse(status: 429, reason: "TooManyRequests")
        #expect(SimulatorFaults.reason(for: 429) == response.reason)
    }

    @Test("an unregistered token answers 410 Unregistered with its timestamp")
    func unregistered() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(unregisteredTokens: [Self.token: 1_764_000_000_500])
        _ = machine.streamOpened(1, faults: faults)
        let actions = machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.9)
        #expect(actions.last == .respond(stream: 1, response: SimulatedResponse(status: 410, reason: "Unregistered", timestamp: 1_764_000_000_500), apnsID: "id", delayMilliseconds: 0))
    }

    @Test("after a rejection the limit drops to one and pending streams are refused, until a push succeeds")
    func dropToOne() {
        var machine = Machine(configuredMaxStreams: 50)
        let faults = SimulatorFaults(latencyMilliseconds: 20, dropToOneStreamAfterRejection: true)
        _ = machine.streamOpened(1, faults: faults)
        #expect(machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.9).first == .sendSettings(maxConcurrentStreams: 50))
        _ = machine.streamClosed(1)
        for stream: Int32 in [3, 5, 7, 9] { _ = machine.streamOpened(stream, faults: faults) }
        _ = machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.9)
        machine.responseSubmitted(3)  // its response is out: not refused
        _ = machine.requestReceived(7, verdict: Self.accepted(), faults: faults, sequence: 3, draw: 0.9)  // still delayed
        let actions = machine.requestReceived(5, verdict: Self.refused(), faults: faults, sequence: 4, draw: 0.9)
        #expect(actions == [
            .sendSettings(maxConcurrentStreams: 1), .refuse(stream: 7), .refuse(stream: 9),
            .respond(stream: 5, response: SimulatedResponse(status: 400, reason: "BadTopic"), apnsID: "id", delayMilliseconds: 20),
        ])
        #expect(!machine.shouldRespond(7))
        #expect(machine.requestReceived(9, verdict: Self.accepted(), faults: faults, sequence: 5, draw: 0.9) == [])
        // A stream opened in the same burst, while 5 still waits, is refused at once.
        #expect(machine.streamOpened(11, faults: faults) == [.refuse(stream: 11)])
        #expect(machine.phase == .restricted)
        for stream: Int32 in [3, 5, 7, 9, 11] { _ = machine.streamClosed(stream) }
        _ = machine.streamOpened(13, faults: faults)
        #expect(machine.requestReceived(13, verdict: Self.accepted(), faults: faults, sequence: 6, draw: 0.9) == [
            .sendSettings(maxConcurrentStreams: 50), Self.ok(13, delay: 20),
        ])
    }
}

extension ConnectionStateMachineTests {
    @Test("an injected 429 carries the configured retry-after; a 500 does not")
    func retryAfter() {
        var machine = Machine(configuredMaxStreams: 100)
        let faults = SimulatorFaults(errorSchedule: [429, 500], retryAfterSeconds: 2)
        _ = machine.streamOpened(1, faults: faults)
        #expect(machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.9).last
            == .respond(stream: 1, response: SimulatedResponse(status: 429, reason: "TooManyRequests", retryAfter: 2), apnsID: "id", delayMilliseconds: 0))
        _ = machine.streamOpened(3, faults: faults)
        #expect(machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.9).last
            == .respond(stream: 3, response: SimulatedResponse(status: 500, reason: "InternalServerError"), apnsID: "id", delayMilliseconds: 0))
        #expect(throws: SimulatorError.self) { try SimulatorFaults(retryAfterSeconds: -1).validate() }
    }

    @Test("an injected error status drops the stream limit to one like a rejection")
    func dropToOneAfterInjectedError() {
        var machine = Machine(configuredMaxStreams: 50)
        let faults = SimulatorFaults(errorSchedule: [200, 503], dropToOneStreamAfterRejection: true)
        _ = machine.streamOpened(1, faults: faults)
        #expect(machine.requestReceived(1, verdict: Self.accepted(), faults: faults, sequence: 1, draw: 0.9).first == .sendSettings(maxConcurrentStreams: 50))
        _ = machine.streamClosed(1)
        for stream: Int32 in [3, 5] { _ = machine.streamOpened(stream, faults: faults) }
        let actions = machine.requestReceived(3, verdict: Self.accepted(), faults: faults, sequence: 2, draw: 0.9)
        #expect(actions.prefix(2) == [.sendSettings(maxConcurrentStreams: 1), .refuse(stream: 5)])
        #expect(machine.phase == .restricted)
    }
}
