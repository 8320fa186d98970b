/// The decisions for one simulated APNs connection: the stream limit it
/// announces, which faults strike which stream, when it goes away. Inputs
/// are `mutating func`s returning the actions the channel handler performs;
/// the server-wide request sequence and the random draw are passed in.
struct ConnectionStateMachine: Sendable {
    enum Phase: Sendable, Hashable {
        /// One stream allowed until a push succeeds.
        case restricted
        /// The configured stream limit applies.
        case open
        /// GOAWAY sent; streams above `lastStreamID` are not processed.
        case goingAway(lastStreamID: Int32)
        /// The connection is being closed; nothing more is answered.
        case closed
    }

    enum Action: Sendable, Hashable {
        /// Answer `stream` after `delayMilliseconds`.
        case respond(stream: Int32, response: SimulatedResponse, apnsID: String, delayMilliseconds: Int64)
        /// Reset `stream` with `REFUSED_STREAM`.
        case refuse(stream: Int32)
        /// Announce a new `SETTINGS_MAX_CONCURRENT_STREAMS`.
        case sendSettings(maxConcurrentStreams: UInt32)
        /// Send GOAWAY (NO_ERROR) with this last-stream-id.
        case goAway(lastStreamID: Int32)
        /// Close once the pending output is written (after a GOAWAY has drained).
        case closeWhenFlushed
        /// Close the TCP connection now, answering nothing more.
        case reset
    }

    let configuredMaxStreams: UInt32
    private(set) var phase: Phase = .restricted
    /// Streams opened and not closed.
    private(set) var openStreams: Set<Int32> = []
    /// Open streams whose response has been decided (it may still wait
    /// for added latency).
    private(set) var answeredStreams: Set<Int32> = []
    /// Open streams whose response has been handed to nghttp2.
    private(set) var respondedStreams: Set<Int32> = []
    /// Open streams reset `REFUSED_STREAM`: nothing more is sent on them.
    private(set) var refusedStreams: Set<Int32> = []
    /// Whether the current restriction to one stream follows a rejection
    /// (rather than being the connection's start).
    private var restrictedAfterRejection = false
    private(set) var peakConcurrentStreams = 0
    private(set) var streamsOpened = 0
    private(set) var requestsReceived = 0
    /// The limit most recently announced.
    private(set) var announcedMaxStreams: UInt32 = 1
    /// Announced limits not yet acknowledged, oldest first.
    private var pendingLimits: [UInt32] = [1]
    /// The limit the client has acknowledged (HTTP/2 default before any ACK: unlimited).
    private(set) var acknowledgedMaxStreams: UInt32 = .max
    /// Streams opened beyond an acknowledged limit.
    private(set) var limitViolations = 0

    /// `initialMaxStreams` is the limit of the connection's first SETTINGS
    /// frame: 1 as APNs does, or more for load generators that do not wait
    /// for a first response.
    init(configuredMaxStreams: UInt32, initialMaxStreams: UInt32 = 1) {
        self.configuredMaxStreams = configuredMaxStreams
        self.announcedMaxStreams = initialMaxStreams
        self.pendingLimits = [initialMaxStreams]
    }

    mutating func settingsAcknowledged() {
        if !pendingLimits.isEmpty { acknowledgedMaxStreams = pendingLimits.removeFirst() }
    }

    mutating func streamOpened(_ stream: Int32, faults: SimulatorFaults) -> [Action] {
        if openStreams.count >= Int(acknowledgedMaxStreams) { limitViolations += 1 }
        openStreams.insert(stream)
        peakConcurrentStreams = max(peakConcurrentStreams, openStreams.count)
        streamsOpened += 1
        switch phase {
        case .restricted, .open:
            if restrictedAfterRejection, openStreams.contains(where: { $0 != stream && isPending($0) }) {
                // Opened in the same burst as the rejection, beyond the one stream now allowed.
                answeredStreams.insert(stream)
                refusedStreams.insert(stream)
                return [.refuse(stream: stream)]
            }
            if let limit = faults.goAwayAfterStreams, streamsOpened >= limit {
                phase = .goingAway(lastStreamID: stream)
                return [.goAway(lastStreamID: stream)]
            }
            return []
        case .goingAway, .closed:
            return []
        }
    }

    /// A complete request and what the APNs rules made of it.
    mutating func requestReceived(
        _ stream: Int32, verdict: APNsRequestRules.Verdict, faults: SimulatorFaults, sequence: Int, draw: Double
    ) -> [Action] {
        switch phase {
        case .closed:
            return []
        case .goingAway(let lastStreamID) where stream > lastStreamID:
            return []
        case .restricted, .open, .goingAway:
            break
        }
        if refusedStreams.contains(stream) { return [] }
        requestsReceived += 1
        if let limit = faults.resetConnectionAfterRequests, requestsReceived >= limit {
            phase = .closed
            return [.reset]
        }
        if let every = faults.refuseStreamEvery, sequence % every == 0 {
            answeredStreams.insert(stream)
            refusedStreams.insert(stream)
            return [.refuse(stream: stream)]
        }
        let delay = faults.latencyMilliseconds
        var response = verdict.response
        if verdict.isAccepted, let token = verdict.deviceToken, let since = faults.unregisteredTokens[token] {
            response = SimulatedResponse(status: 410, reason: "Unregistered", timestamp: since)
        } else if verdict.isAccepted, let status = injectedStatus(faults: faults, sequence: sequence, draw: draw) {
            response = SimulatedResponse(
                status: status, reason: SimulatorFaults.reason(for: status),
                retryAfter: status == 200 || status == 500 ? nil : faults.retryAfterSeconds)
        }
        answeredStreams.insert(stream)
        var actions: [Action] = []
        // A rejection is any answer but a success (200, or 201/204 from
        // channel management): the rules' refusals and injected statuses alike.
        if (200..<300).contains(response.status) {
            if case .restricted = phase {
                phase = .open
                restrictedAfterRejection = false
                if announcedMaxStreams != configuredMaxStreams { actions.append(announce(configuredMaxStreams)) }
            }
        } else if faults.dropToOneStreamAfterRejection, case .open = phase {
            phase = .restricted
            restrictedAfterRejection = true
            actions.append(announce(1))
            // Every other stream still waiting for its response is reset.
            for other in openStreams.sorted() where other != stream && isPending(other) {
                answeredStreams.insert(other)
                refusedStreams.insert(other)
                actions.append(.refuse(stream: other))
            }
        }
        actions.append(.respond(stream: stream, response: response, apnsID: verdict.apnsID, delayMilliseconds: delay))
        return actions
    }

    /// The response of `stream` was handed to nghttp2.
    mutating func responseSubmitted(_ stream: Int32) {
        if openStreams.contains(stream) { respondedStreams.insert(stream) }
    }

    mutating func streamClosed(_ stream: Int32) -> [Action] {
        openStreams.remove(stream)
        answeredStreams.remove(stream)
        respondedStreams.remove(stream)
        refusedStreams.remove(stream)
        switch phase {
        case .goingAway(let lastStreamID):
            if !openStreams.contains(where: { $0 <= lastStreamID }) {
                phase = .closed
                return [.closeWhenFlushed]
            }
            return []
        case .restricted, .open, .closed:
            return []
        }
    }

    /// Whether a delayed response for `stream` is still wanted: the stream
    /// is open, not refused, and the connection not closed.
    func shouldRespond(_ stream: Int32) -> Bool {
        switch phase {
        case .closed: false
        case .restricted, .open, .goingAway: openStreams.contains(stream) && !refusedStreams.contains(stream)
        }
    }

    /// Open and waiting for its response (not yet sent, not refused).
    private func isPending(_ stream: Int32) -> Bool {
        !respondedStreams.contains(stream) && !refusedStreams.contains(stream)
    }

    private mutating func announce(_ limit: UInt32) -> Action {
        announcedMaxStreams = limit
        pendingLimits.append(limit)
        return .sendSettings(maxConcurrentStreams: limit)
    }

    private func injectedStatus(faults: SimulatorFaults, sequence: Int, draw: Double) -> Int? {
        if !faults.errorSchedule.isEmpty {
            let status = faults.errorSchedule[(sequence - 1) % faults.errorSchedule.count]
            if status != 200 { return status }
        }
        if faults.errorRate > 0, draw < faults.errorRate, !faults.errorStatuses.isEmpty {
            // The draw below the rate, rescaled, picks the status evenly.
            let index = min(Int(draw / faults.errorRate * Double(faults.errorStatuses.count)), faults.errorStatuses.count - 1)
            return faults.errorStatuses[index]
        }
        return nil
    }
}
