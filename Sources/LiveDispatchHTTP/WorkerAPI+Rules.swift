import Foundation
import LiveDispatchCore
import LiveDispatchRules
import OpenAPIRuntime

extension WorkerAPI {
    /// `POST /v1/rules/explain`: what `livedispatch rules explain` prints,
    /// for the rules this worker runs now. Nothing is produced.
    func explainRules(_ input: Operations.ExplainRules.Input) async throws -> Operations.ExplainRules.Output {
        let request = switch input.body { case .json(let body): body }
        switch Self.explain(request, rules: rules(), now: UnixTime(seconds: Date().timeIntervalSince1970)) {
        case .success(let explanation): return .ok(.init(body: .json(explanation)))
        case .failure(let error): return .badRequest(.init(body: .json(error.body)))
        }
    }

    static func explain(
        _ request: Components.Schemas.ExplainRequest, rules: RuleSet, now: UnixTime
    ) -> Result<Components.Schemas.Explanation, APIError> {
        var clock = now
        switch request.now {
        case nil:
            break
        case .case1(let seconds):
            guard let time = UnixTime(acceptedSeconds: seconds) else {
                return .failure(.invalid("the request is not valid", problems: [.init(pointer: "/now", message: "expected Unix seconds from 0 to 253402300799")]))
            }
            clock = time
        case .case2(let text):
            guard let time = UnixTime(iso8601: text), time.isAccepted else {
                return .failure(.invalid("the request is not valid", problems: [.init(pointer: "/now", message: "expected an ISO-8601 date such as 2025-11-24T18:00:00Z")]))
            }
            clock = time
        }
        let record = EventRecord(topic: request.topic, key: request.key, timestamp: clock)
        switch rules.explain(record, value: encoded(request.event).serialized(), now: clock) {
        case .failure(let failure):
            return .failure(.invalid("the event cannot be evaluated", problems: [.init(pointer: "/event", message: failure.reason)]))
        case .success(let explanations):
            return .success(.init(topic: request.topic, rules: explanations.map(outcome)))
        }
    }

    static func outcome(_ explanation: RuleExplanation) -> Components.Schemas.RuleOutcome {
        switch explanation.status {
        case .otherTopic(let topics):
            return .init(rule: explanation.rule, status: .otherTopic, reasons: topics)
        case .notMatched(let reasons):
            return .init(rule: explanation.rule, status: .notMatched, reasons: reasons)
        case .matched(let commands):
            return .init(rule: explanation.rule, status: .matched, commands: commands.compactMap { container($0.json) })
        case .failed(let failure):
            return .init(rule: explanation.rule, status: .failed, reasons: [failure.reason])
        }
    }
}
