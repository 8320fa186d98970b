import Foundation
import LiveDispatchCore

/// What a command must pass before it is produced: the refusals the
/// dispatcher would otherwise dead-letter where the caller never sees them.
extension WorkerAPI {
    /// Why `command` is refused now, or nil once it is counted among the
    /// accepted commands its activity's next command is judged with (the
    /// check and the count under one lock, so two requests at once are
    /// judged one after the other).
    func admit(_ command: ActivityCommand) async -> APIError? {
        let activity = command.activityID
        let current = currentState(activity)
        let now = UnixTime(seconds: Date().timeIntervalSince1970)
        if command.event == .end, current == nil {
            let pending = accepted.withLock { $0.projection(of: activity, current: nil, now: now).hasPending }
            if !pending, await hasNoState(activity) { return Self.noStateRefusal(activity) }
        }
        let types = rules().types
        return accepted.withLock { machine in
            let projection = machine.projection(of: activity, current: current, now: now)
            if let refusal = Self.refusal(command, projection: projection, types: types) { return refusal }
            machine.accept(command, now: now)
            return nil
        }
    }

    /// The 404 for an end of an activity this worker holds no state of:
    /// the dispatcher would dead-letter it `invalid-command`.
    static func noStateRefusal(_ activity: ActivityID) -> APIError {
        APIError(
            status: .notFound, code: "no-activity",
            message: "activity \(String(activity.rawValue.prefix(64)).debugDescription) has no state: it was never started or updated, or it expired; there is nothing to end and nothing was sent",
            problems: [.init(pointer: "#/parameters/activity_id", message: "names no activity with a state")])
    }

    /// The 422 for a command naming another app than its activity's
    /// (`current`): the dispatcher would dead-letter it `invalid-command`.
    static func appRefusal(_ command: ActivityCommand, current: ActivityState?) -> APIError? {
        guard let app = command.app, let owner = current?.app, app != owner else { return nil }
        return APIError(
            status: .unprocessableContent, code: "app-mismatch",
            message: "the \(command.event.rawValue) names app \(app.debugDescription), but activity \(String(command.activityID.rawValue.prefix(64)).debugDescription) belongs to app \(owner.debugDescription); nothing was sent",
            problems: [.init(pointer: "/app", message: "the activity belongs to app \(owner.debugDescription)")])
    }
}

extension WorkerAPI {
    /// The 422 for a push-to-start registration whose `attributes_type`
    /// is not a declared activity type, when types are declared: no start
    /// would ever be sent to it (a start names a declared type).
    /// Unregistering is always taken.
    static func typeRefusal(_ record: TokenRecord, types: ActivityTypes, inParameters: Bool) -> APIError? {
        guard case .pushToStart(let registration) = record, registration.action == .register,
            let problem = types.undeclaredProblem(registration.attributesType)
        else { return nil }
        return APIError(
            status: .unprocessableContent, code: "undeclared-type",
            message: "the push-to-start registration's attributes_type \(problem.message); nothing was registered",
            problems: [.init(pointer: inParameters ? "#/parameters/attributes_type" : "/attributes_type", message: problem.message)])
    }
}
