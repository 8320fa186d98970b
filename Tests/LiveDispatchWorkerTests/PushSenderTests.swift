@testable import APNs
import LiveDispatchCore
@testable import LiveDispatchWorker
import Synchronization
import Testing

/// APNs' answer classified once: the outcome the fan-out acts on beside the
/// label `livedispatch_pushes_total` counts it under.
@Suite("PushSender classification")
struct PushSenderTests {
    static func retryable(status: Int?, reason: APNsReason?, error: APNsError, after: Double? = nil) -> APNsOutcome {
        .retryable(.init(status: status, reason: reason, error: error, retryAfter: after))
    }

    @Test func eachAnswerKeepsItsMetricLabel() {
        let answers: [APNsOutcome] = [
            .delivered(apnsID: "a"),
            .tokenInvalid(reason: .unregistered, since: nil),
            .permanent(status: 400, reason: .badTopic),
            Self.retryable(status: 429, reason: .tooManyRequests, error: .serverRefused(status: 429, reason: .tooManyRequests)),
            .misconfigured(.providerTokenRejected(reason: .invalidProviderToken)),
        ]
        #expect(answers.map { PushSender.classify($0).label } == APNsOutcome.labels)
    }

    @Test func theFanOutGetsTheOutcomeItActsOn() {
        #expect(PushSender.classify(.delivered(apnsID: "a")) == SendResult(outcome: .delivered, label: "delivered", status: 200))
        #expect(
            PushSender.classify(.tokenInvalid(reason: .badDeviceToken, since: nil)).outcome
                == .tokenInvalid(reason: "BadDeviceToken"))
        #expect(PushSender.classify(.permanent(status: 400, reason: .badTopic)).outcome == .permanent(reason: "400 BadTopic"))
        let throttled = Self.retryable(
            status: 429, reason: .tooManyRequests, error: .serverRefused(status: 429, reason: .tooManyRequests), after: 5)
        #expect(PushSender.classify(throttled).outcome == .retryable(reason: "429 TooManyRequests", after: 5))
        let timedOut = Self.retryable(status: nil, reason: nil, error: .timeout(seconds: 30))
        #expect(PushSender.classify(timedOut).outcome == .retryable(reason: APNsError.timeout(seconds: 30).description, after: nil))
        #expect(PushSender.classify(timedOut).misconfiguration == nil)
        #expect(PushSender.classify(throttled).status == 429)
        #expect(PushSender.classify(timedOut).status == nil)
    }

    @Test func aMisconfigurationIsRetriedAndNamesItsError() {
        let error = APNsError.providerTokenRejected(reason: .invalidProviderToken)
        let result = PushSender.classify(.misconfigured(error))
        #expect(result.outcome == .retryable(reason: "misconfigured: \(error)", after: nil))
        #expect(result.label == "misconfigured")
        #expect(result.misconfiguration == error)
    }

    @Test func aSendOfAnAppWithoutARouteIsRefusedAndNotCounted() throws {
        let sender = PushSender(routes: [:], defaultApp: "scores")
        let send = PartitionDispatcher.Send(
            activityID: try ActivityID("match-7"), token: try DeviceToken(hex: "a1"), environment: .production, app: "news",
            push: LiveActivityPush(
                activityID: try ActivityID("match-7"), version: 1, event: .update, contentState: ["score": .integer(1)],
                timestamp: UnixTime(seconds: 0)),
            payload: [])
        let results = Mutex<[Int: SendResult]>([:])
        sender.submit([send]) { index, result in results.withLock { $0[index] = result } }
        let result = try #require(results.withLock { $0[0] })
        #expect(result.label == nil)
        #expect(result.misconfiguration == nil)
        guard case .permanent(let reason) = result.outcome else {
            Issue.record("expected a permanent outcome, got \(result.outcome)")
            return
        }
        #expect(reason.contains("no APNs route for app \"news\""))
    }
}
