/// Who holds the main listener's connections, as a value-type state
/// machine: at most `maxPerAddress` connections per client address (as
/// nginx's `limit_conn`), the idle ones closed first when the listener is
/// full, and shorter head and body timeouts while more than half of the
/// slots are taken.
///
/// The listener itself admits at most `maxConnections` connections (the
/// rest wait in the listen backlog); this machine sees each one it admits.
/// When the last slot is taken, the connection idle longest is closed so
/// that the next one waiting can come in: first a kept-alive connection
/// waiting for its next request, then one that has not sent a request yet.
/// A connection reading a body or being answered is never chosen.
///
/// Time is passed in; each input returns what the owner does.
struct ConnectionAdmission: Sendable {
    typealias ConnectionID = Int

    struct Limits: Sendable, Hashable {
        var maxConnections: Int
        var maxPerAddress: Int
        var headerTimeout: Duration
        var requestTimeout: Duration
        /// The header timeout while under pressure (never longer than `headerTimeout`).
        var pressuredHeaderTimeout: Duration = .seconds(2)
        /// The body timeout while under pressure (never longer than `requestTimeout`).
        var pressuredRequestTimeout: Duration = .seconds(10)
    }

    /// The head and body timeouts a connection gets now.
    struct Timeouts: Sendable, Hashable {
        var header: Duration
        var request: Duration
    }

    enum Activity: Sendable, Hashable {
        /// Opened, no request yet.
        case fresh(since: ContinuousClock.Instant)
        /// Kept alive after a response, waiting for the next request.
        case idle(since: ContinuousClock.Instant)
        /// Reading a request or answering it.
        case busy
    }

    struct Connection: Sendable, Hashable {
        var address: String
        var activity: Activity
    }

    enum OpenAction: Sendable, Hashable {
        /// Serve it with these timeouts; close the connections listed to make room.
        case accept(Timeouts, close: [ConnectionID])
        /// Its address already holds its share: close it at once.
        case refuse(address: String, held: Int)
    }

    let limits: Limits
    private(set) var connections: [ConnectionID: Connection] = [:]
    private(set) var perAddress: [String: Int] = [:]

    init(limits: Limits) {
        var limits = limits
        limits.maxConnections = max(1, limits.maxConnections)
        limits.maxPerAddress = max(1, limits.maxPerAddress)
        limits.pressuredHeaderTimeout = min(limits.pressuredHeaderTimeout, limits.headerTimeout)
        limits.pressuredRequestTimeout = min(limits.pressuredRequestTimeout, limits.requestTimeout)
        self.limits = limits
    }

    /// More than half of the listener's slots are taken.
    var underPressure: Bool { connections.count * 2 > limits.maxConnections }

    /// The timeouts for a head or body whose wait starts now.
    var timeouts: Timeouts {
        underPressure
            ? Timeouts(header: limits.pressuredHeaderTimeout, request: limits.pressuredRequestTimeout)
            : Timeouts(header: limits.headerTimeout, request: limits.requestTimeout)
    }

    /// Whether one more connection from `address` would be within its share.
    func hasRoom(for address: String) -> Bool {
        perAddress[address, default: 0] < limits.maxPerAddress
    }

    mutating func opened(_ id: ConnectionID, address: String, at now: ContinuousClock.Instant) -> OpenAction {
        let held = perAddress[address, default: 0]
        if held >= limits.maxPerAddress { return .refuse(address: address, held: held) }
        perAddress[address] = held + 1
        connections[id] = Connection(address: address, activity: .fresh(since: now))
        return .accept(timeouts, close: makeRoom(sparing: id))
    }

    /// A request's head arrived.
    mutating func requestStarted(_ id: ConnectionID) {
        connections[id]?.activity = .busy
    }

    /// A response was written and the connection is kept alive. Returns the
    /// connections to close: this one, when the listener is full.
    mutating func responded(_ id: ConnectionID, at now: ContinuousClock.Instant) -> [ConnectionID] {
        guard connections[id] != nil else { return [] }
        connections[id]?.activity = .idle(since: now)
        return makeRoom(sparing: nil)
    }

    mutating func closed(_ id: ConnectionID) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        let held = perAddress[connection.address, default: 1] - 1
        perAddress[connection.address] = held > 0 ? held : nil
    }

    /// When every slot is taken, the one connection idle longest (kept-alive
    /// first, then fresh), other than `sparing`, leaves the machine to be closed.
    private mutating func makeRoom(sparing: ConnectionID?) -> [ConnectionID] {
        guard connections.count >= limits.maxConnections else { return [] }
        var chosen: (id: ConnectionID, rank: Int, since: ContinuousClock.Instant)?
        for (id, connection) in connections where id != sparing {
            let candidate: (rank: Int, since: ContinuousClock.Instant)
            switch connection.activity {
            case .idle(let since): candidate = (0, since)
            case .fresh(let since): candidate = (1, since)
            case .busy: continue
            }
            if let current = chosen, (current.rank, current.since, current.id) <= (candidate.rank, candidate.since, id) { continue }
            chosen = (id, candidate.rank, candidate.since)
        }
        guard let chosen else { return [] }
        closed(chosen.id)
        return [chosen.id]
    }
}
