import NIOCore
import Synchronization

/// The owner of the main listener's ``ConnectionAdmission``: the machine
/// under one lock, and the channels it may ask to close. Each connection's
/// ``RequestDeadlineHandler`` tells it what happens and performs what it
/// answers; closing another connection is done after the lock is released.
final class ConnectionLedger: Sendable {
    private struct State {
        var machine: ConnectionAdmission
        var channels: [ConnectionAdmission.ConnectionID: any Channel] = [:]
        var nextID = 0
    }

    private let state: Mutex<State>

    init(limits: ConnectionAdmission.Limits) {
        state = Mutex(State(machine: ConnectionAdmission(limits: limits)))
    }

    /// What a newly opened connection gets: its id and timeouts, or nil when
    /// it must be closed at once (its address holds its share).
    func opened(_ channel: any Channel, at now: ContinuousClock.Instant) -> (id: ConnectionAdmission.ConnectionID, timeouts: ConnectionAdmission.Timeouts)? {
        let address = Self.address(of: channel)
        let (answer, evicted) = state.withLock { state -> ((ConnectionAdmission.ConnectionID, ConnectionAdmission.Timeouts)?, [any Channel]) in
            let id = state.nextID
            state.nextID += 1
            switch state.machine.opened(id, address: address, at: now) {
            case .refuse:
                return (nil, [])
            case .accept(let timeouts, let close):
                state.channels[id] = channel
                return ((id, timeouts), close.compactMap { state.channels.removeValue(forKey: $0) })
            }
        }
        for channel in evicted { channel.close(promise: nil) }
        return answer
    }

    /// The client address a connection comes from.
    static func address(of channel: any Channel) -> String {
        channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Whether `address` holds fewer connections than its share: a cheap
    /// look before anything is set up for a new connection (``opened(_:at:)``
    /// decides).
    func hasRoom(for address: String) -> Bool {
        state.withLock { $0.machine.hasRoom(for: address) }
    }

    func requestStarted(_ id: ConnectionAdmission.ConnectionID) -> ConnectionAdmission.Timeouts {
        state.withLock { state in
            state.machine.requestStarted(id)
            return state.machine.timeouts
        }
    }

    func responded(_ id: ConnectionAdmission.ConnectionID, at now: ContinuousClock.Instant) -> ConnectionAdmission.Timeouts {
        let (timeouts, evicted) = state.withLock { state in
            let close = state.machine.responded(id, at: now)
            return (state.machine.timeouts, close.compactMap { state.channels.removeValue(forKey: $0) })
        }
        for channel in evicted { channel.close(promise: nil) }
        return timeouts
    }

    func closed(_ id: ConnectionAdmission.ConnectionID) {
        state.withLock { state in
            state.machine.closed(id)
            state.channels[id] = nil
        }
    }

    /// Connections held now, in all and by the busiest address.
    var counts: (total: Int, busiestAddress: Int) {
        state.withLock { ($0.machine.connections.count, $0.machine.perAddress.values.max() ?? 0) }
    }
}
