/// The established TCP connections `ss -H -t -i -n -p state established`
/// lists, each with its process and the data segments it has sent
/// (`data_segs_out`, a counter of the kernel's). An idle Kafka client sends
/// one segment per request (fetches, heartbeats), so the segments its
/// connections to a broker send in an interval count its requests without
/// touching the client.
public struct SocketSegments: Sendable, Equatable {
    public struct Connection: Sendable, Hashable {
        public var local: String
        public var peer: String
        public var pid: Int32?
        public var dataSegmentsOut: UInt64

        public init(local: String, peer: String, pid: Int32?, dataSegmentsOut: UInt64) {
            self.local = local
            self.peer = peer
            self.pid = pid
            self.dataSegmentsOut = dataSegmentsOut
        }
    }

    public var connections: [Connection]

    public init(connections: [Connection]) { self.connections = connections }

    /// Parses `ss -H -t -i -n -p state established` output: a line per
    /// connection (receive queue, send queue, local address, peer address,
    /// `users:((…,pid=N,…))`), then an indented line of its TCP counters.
    /// A connection without a `data_segs_out` counter (nothing sent yet)
    /// counts 0; lines of another shape are skipped.
    public init(ssOutput text: String) {
        var connections: [Connection] = []
        for line in text.split(separator: "\n") {
            if let first = line.first, first == " " || first == "\t" {
                guard !connections.isEmpty else { continue }
                for field in line.split(separator: " ") where field.hasPrefix("data_segs_out:") {
                    connections[connections.count - 1].dataSegmentsOut = UInt64(field.dropFirst("data_segs_out:".count)) ?? 0
                }
                continue
            }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 4, UInt64(fields[0]) != nil, UInt64(fields[1]) != nil else { continue }
            var pid: Int32?
            if let range = line.range(of: "pid=") {
                pid = Int32(line[range.upperBound...].prefix { $0.isNumber })
            }
            connections.append(Connection(local: String(fields[2]), peer: String(fields[3]), pid: pid, dataSegmentsOut: 0))
        }
        self.connections = connections
    }

    /// Data segments that connections of `pids` to a peer whose port is in
    /// `peerPorts` sent from `earlier` to this reading. A connection in both
    /// readings counts its increase; one opened since counts all it sent;
    /// what a connection closed in between sent after `earlier` is not seen.
    public func segmentsSent(since earlier: SocketSegments, pids: Set<Int32>, peerPorts: Set<Int>) -> UInt64 {
        func chosen(_ connection: Connection) -> Bool {
            guard let pid = connection.pid, pids.contains(pid), let colon = connection.peer.lastIndex(of: ":"),
                  let port = Int(connection.peer[connection.peer.index(after: colon)...])
            else { return false }
            return peerPorts.contains(port)
        }
        var before: [String: UInt64] = [:]
        for connection in earlier.connections where chosen(connection) {
            before[connection.local + " " + connection.peer] = connection.dataSegmentsOut
        }
        var sent: UInt64 = 0
        for connection in connections where chosen(connection) {
            let was = before[connection.local + " " + connection.peer] ?? 0
            if connection.dataSegmentsOut >= was { sent += connection.dataSegmentsOut - was }
        }
        return sent
    }
}
