import Foundation

/// What `livedispatch-bench idle` measured, and its line.
public struct IdleFigures: Sendable, Equatable {
    /// Each worker's share of one core, in percent; nil where it could not be read.
    public var workerPercents: [Double?]
    /// The broker's share of one core, in percent; nil when not measured.
    public var brokerPercent: Double?
    public var brokerPID: Int32?
    /// Requests the workers sent the broker per second (their connections' data segments).
    public var requestsPerSecond: Double

    public init(workerPercents: [Double?], brokerPercent: Double?, brokerPID: Int32?, requestsPerSecond: Double) {
        self.workerPercents = workerPercents
        self.brokerPercent = brokerPercent
        self.brokerPID = brokerPID
        self.requestsPerSecond = requestsPerSecond
    }

    /// `idle: 4 workers, worker CPU 0.3/0.2/0.3/0.2 % of a core, broker CPU 1.5 % (pid 812), requests to the broker 9.4/s`
    public var line: String {
        let workers = workerPercents.map { $0.map { String(format: "%.1f", $0) } ?? "?" }.joined(separator: "/")
        let broker: String
        switch (brokerPercent, brokerPID) {
        case (let percent?, let pid?): broker = String(format: "broker CPU %.1f %% (pid %d)", percent, pid)
        case (let percent?, nil): broker = String(format: "broker CPU %.1f %%", percent)
        case (nil, let pid?): broker = "broker CPU ? (pid \(pid) could not be read)"
        case (nil, nil): broker = "broker CPU not measured (give --broker-pid)"
        }
        return "idle: \(workerPercents.count) worker\(workerPercents.count == 1 ? "" : "s"), worker CPU \(workers) % of a core, \(broker), "
            + String(format: "requests to the broker %.1f/s", requestsPerSecond)
    }
}
