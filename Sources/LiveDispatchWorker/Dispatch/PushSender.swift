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
        let request = APNsRequest(
            push: send.push, payload: send.payload, to: .device(send.token), bundleID: bundleID,
            apnsID: UUID().uuidString.lowercased())
        let pool = send.environment == .sandbox ? sandbox : production
        let outcome = await pool.send(request)
        return (Self.classify(outcome), outcome)
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
