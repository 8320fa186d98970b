import Foundation
import LiveDispatchCore
import Synchronization

/// Prints, as the demo runs, what each activity's Lock Screen would show
/// after every push, which tokens it reached, how many commands were merged
/// into it, and every dead letter.
public final class ConsolePrinter: Sendable {
    let write: @Sendable (String) -> Void
    private let started = Mutex(Date())

    public init(write: @escaping @Sendable (String) -> Void) {
        self.write = write
    }

    func restartClock() { started.withLock { $0 = Date() } }

    private var elapsed: String {
        String(format: "%+6.1fs", Date().timeIntervalSince(started.withLock { $0 }))
    }

    func observe(_ observation: PartitionDispatcher.Observation) {
        switch observation {
        case .pushCompleted(let state, let commands, let tokenCount, let sample, _):
            let merged = commands == 1 ? "1 command" : "\(commands) commands coalesced"
            var reached = tokenCount == 1 ? "1 token" : "\(tokenCount) tokens"
            if !sample.isEmpty {
                reached += " (" + sample.map { String($0.hex.prefix(8)) + "…" }.joined(separator: ", ") + (tokenCount > sample.count ? ", …" : "") + ")"
            }
            let ended = state.isEnded ? " [ended]" : ""
            write("\(elapsed)  🔒 \(state.activityID)  \(LockScreen.render(state))\(ended)\n           push v\(state.version): \(merged) → \(reached)")
        case .deadLettered(let letter):
            write("\(elapsed)  ✗ dead letter \(letter.reason): \(letter.message)")
        case .tokenRemoved(let activity, let token, let reason):
            write("\(elapsed)  ✂ token \(token.hex.prefix(8))… of \(activity) removed (\(reason))")
        case .activityExpired(let activity, let reason):
            write("\(elapsed)  ⌛ \(activity) expired (\(reason))")
        case .priorityDowngraded(let activity, let version, let from, let to):
            write("\(elapsed)  ↓ \(activity) push v\(version) at priority \(to) instead of \(from): the hour's priority-10 budget is spent")
        case .duplicateCommand(let activity, let commandID):
            write("\(elapsed)  ↺ \(activity): command \(commandID.debugDescription) was applied before; acknowledged, not applied")
        case .uncheckedCommand:
            break
        case .audienceStarted(let activity, let audience, let delivered, let alreadyStarted):
            var parts: [String] = []
            if !delivered.isEmpty {
                let tokens = delivered.map { String($0.hex.prefix(8)) + "…" }.joined(separator: ", ")
                parts.append("started on \(delivered.count) push-to-start token\(delivered.count == 1 ? "" : "s") (\(tokens))")
            }
            if alreadyStarted > 0 { parts.append("\(alreadyStarted) already started, not started again") }
            if parts.isEmpty { parts.append("no push-to-start token of its type") }
            write("\(elapsed)  ▶ \(activity) → audience \(audience): \(parts.joined(separator: "; "))")
        case .channelCreated(let activity, let channel):
            write("\(elapsed)  📡 \(activity): broadcast channel \(channel.id) created (\(channel.storagePolicy))")
        case .channelDeleted(let activity, let channelID):
            write("\(elapsed)  📡 \(activity): broadcast channel \(channelID) deleted")
        case .pushTraced:
            break
        }
    }

    func published(_ step: Scenario.Step) {
        let what: String
        switch step.destination {
        case .domain(let topic):
            let kind = step.value["type"]?.stringValue ?? step.value["status"]?.stringValue ?? "event"
            what = "event \(topic) \(kind)"
        case .internalTopic(let topic):
            let action = step.value["action"]?.stringValue ?? "register"
            let token = step.value["token"]?.stringValue.map { String($0.prefix(8)) + "…" } ?? ""
            let kind = step.value["kind"]?.stringValue == TokenKind.pushToStart.rawValue ? "push-to-start token" : "token"
            what = topic == .tokens ? "\(kind) \(action) \(token)" : "record \(topic.rawValue)"
        }
        write("\(elapsed)  → \(what) (key \(step.key ?? "none"))")
    }

    func note(_ text: String) {
        write("\(elapsed)  \(text)")
    }
}
