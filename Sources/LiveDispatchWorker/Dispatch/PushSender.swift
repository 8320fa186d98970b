import APNs
import Foundation
import LiveDispatchCore

/// Sends pushes through one APNs pool per environment (both may be the same
/// pool, as with a simulator) and turns APNs' answer into what the fan-out
/// needs.
public struct PushSender: Sendable {
    let production: APNsConnectionPool
    let sandbox: APNsConnectionPool
    let bundleID: String

    public init(production: APNsConnectionPool, sandbox: APNsConnectionPool, bundleID: String) {
        self.production = production
        self.sandbox = sandbox
        self.bundleID = bundleID
    }

    /// Sends one push and classifies the result for ``FanOut``.
    func send(_ send: PartitionDispatcher.Send) async -> (FanOut.Outcome, APNsOutcome) {
        let request = send.request(bundleID: bundleID, apnsID: UUID().uuidString.lowercased())
        let pool = send.environment == .sandbox ? sandbox : production
        let outcome = await pool.send(request)
        return (Self.classify(outcome), outcome)
    }

    /// Starts a batch of sends and returns at once; `onOutcome` is called
    /// once per send with its index, from the APNs pool's event loops.
    func submit(_ sends: [PartitionDispatcher.Send], onOutcome: @escaping @Sendable (Int, FanOut.Outcome, APNsOutcome) -> Void) {
        var production: [APNsRequest] = []
        var productionIndex: [Int] = []
        var sandbox: [APNsRequest] = []
        var sandboxIndex: [Int] = []
        for (index, send) in sends.enumerated() {
            let request = send.request(bundleID: bundleID, apnsID: UUID().uuidString.lowercased())
            if send.environment == .sandbox {
                sandbox.append(request)
                sandboxIndex.append(index)
            } else {
                production.append(request)
                productionIndex.append(index)
            }
        }
        let productionPositions = productionIndex
        let sandboxPositions = sandboxIndex
        self.production.submit(production) { index, outcome in onOutcome(productionPositions[index], Self.classify(outcome), outcome) }
        self.sandbox.submit(sandbox) { index, outcome in onOutcome(sandboxPositions[index], Self.classify(outcome), outcome) }
    }

    static func classify(_ outcome: APNsOutcome) -> FanOut.Outcome {
        switch outcome {
        case .delivered:
            return .delivered
        case .tokenInvalid(let reason, _):
            return .tokenInvalid(reason: reason.description)
        case .permanent(let status, let reason):
            return .permanent(reason: "\(status) \(reason)")
        case .retryable(let failure):
            let reason = failure.reason.map { "\(failure.status.map(String.init) ?? "") \($0)".trimmingCharacters(in: .whitespaces) } ?? failure.error.description
            return .retryable(reason: reason, after: failure.retryAfter)
        case .misconfigured(let error):
            // Nothing can succeed until an operator fixes the key or topic:
            // back off and retry, and dead-letter when retries run out.
            return .retryable(reason: "misconfigured: \(error)", after: nil)
        }
    }

    func shutdown() async {
        await production.shutdown()
        if sandbox !== production { await sandbox.shutdown() }
    }
}
