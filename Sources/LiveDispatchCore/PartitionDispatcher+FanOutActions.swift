/// The one place a ``FanOut``'s actions become the partition's, whoever owns
/// the fan-out (an activity's deliveries or an audience start): the owner
/// says what a send, a removed token and a dead letter are for it, and when
/// it is done; waking, the send budget and settling unsent sends are shared.
extension PartitionDispatcher {
    /// A push the fan-out gave up on for one token, as its dead letter needs it.
    struct SendFailure: Sendable {
        var token: DeviceToken
        var push: LiveActivityPush
        var reason: DeadLetterReason
        var detail: String
        var attempts: Int

        /// What every such dead letter says: APNs' reason, the sends made and the version.
        var details: [String: JSONValue] {
            ["apns.reason": .string(detail), "attempts": .integer(Int64(attempts)), "version": .integer(Int64(clamping: push.version))]
        }
    }

    /// Performs `fanOutActions` of `sender`'s fan-out, then whatever the
    /// partition's send budget lets it start, then completes what is done.
    mutating func perform(_ fanOutActions: [FanOut.Action], for sender: Sender, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var pending = fanOutActions[...]
        while true {
            guard let action = pending.popFirst() else {
                // Sends the partition's budget lets start now, if tokens wait.
                let more = continueSending(sender, now: now)
                if more.isEmpty { break }
                pending.append(contentsOf: more)
                continue
            }
            switch action {
            case .send(let token, let push):
                switch plan(token, push, for: sender) {
                case .send(var send)?:
                    sendBudget.started()
                    // Read only for a traced push: its APNs request's span names the attempt.
                    if push.traceContext != nil { send.attempt = withFanOut(sender) { $0.attempts(of: token) } ?? 1 }
                    actions.append(.send(send))
                case .settle(let outcome)?:
                    pending += withFanOut(sender) {
                        $0.completed(token: token, version: push.version, outcome: outcome, now: now, jitter: 0)
                    } ?? []
                case nil:
                    break
                }
            case .wake(let at):
                wakes.schedule(.retry(sender), at: at)
            case .removeToken(let token, let reason):
                actions += removeToken(token, reason: reason, of: sender, now: now)
            case .deadLetter(let token, let push, let reason, let detail, let attempts):
                let failure = SendFailure(token: token, push: push, reason: reason, detail: detail, attempts: attempts)
                switch sender {
                case .activity(let activity):
                    actions += activities.deadLetter(activity, failure, channel: channels.channel(of: activity), now: now, writes: &writes)
                case .audienceStart(let offset):
                    actions += audienceStarts.deadLetter(offset, failure, now: now, writes: &writes)
                }
            case .completed:
                break  // read from the fan-out when the sender finishes
            }
        }
        return actions + finish(sender, now: now)
    }

    /// What a fan-out's send of `push` to `token` becomes.
    private mutating func plan(_ token: DeviceToken, _ push: LiveActivityPush, for sender: Sender) -> SendPlan? {
        switch sender {
        case .activity(let activity) where token == .broadcastChannel:
            channels.broadcast(push, activity: activity)
        case .activity(let activity):
            activities.plan(activity, token, push)
        case .audienceStart(let offset):
            audienceStarts.plan(offset, token, push, defaultEnvironment: configuration.defaultEnvironment)
        }
    }

    private mutating func removeToken(_ token: DeviceToken, reason: String, of sender: Sender, now: UnixTime) -> [Action] {
        switch sender {
        case .activity(let activity) where token == .broadcastChannel:
            channelRefused(activity, reason: reason, now: now)
        case .activity(let activity):
            activities.removeToken(activity, token, reason: reason, writes: &writes)
        case .audienceStart(let offset):
            audienceStarts.removeToken(offset, token, reason: reason, writes: &writes)
        }
    }

    /// A send ended: the sender's fan-out settles it, the sender counts and
    /// records the settlement, and the fan-out's actions are performed.
    mutating func sendEnded(_ send: Send, outcome: FanOut.Outcome, now: UnixTime, jitter: Double) -> [Action] {
        let sender: Sender = send.audienceStart.map(Sender.audienceStart) ?? .activity(send.activityID)
        guard let (settlement, fanOutActions) = withFanOut(sender, {
            $0.settle(token: send.token, version: send.push.version, outcome: outcome, now: now, jitter: jitter)
        }) else { return [] }
        var actions: [Action] = []
        switch sender {
        case .activity: actions = activities.settled(send, settlement, now: now, writes: &writes)
        case .audienceStart(let offset): audienceStarts.settled(offset, send.token, settlement)
        }
        return actions + perform(fanOutActions, for: sender, now: now)
    }

    /// A write `sender` waited for is acknowledged.
    mutating func writeAcknowledged(by sender: Sender, now: UnixTime) -> [Action] {
        switch sender {
        case .activity(let activity): activities.writeAcknowledged(activity)
        case .audienceStart(let offset): audienceStarts.writeAcknowledged(offset)
        }
        return finish(sender, now: now)
    }

    /// Completes what `sender` has finished: an activity's pushes that
    /// reached every token (their snapshot is written; its ack commits their
    /// offsets), or a whole audience start.
    mutating func finish(_ sender: Sender, now: UnixTime) -> [Action] {
        switch sender {
        case .activity(let activity):
            guard let completion = activities.complete(activity, now: now) else { return [] }
            lifecycle.completed(activity, through: completion.newest.push.version)
            let snapshot = PushSummary.serializedSnapshot(
                completion.newest.snapshot, history: completion.history, channel: channels.channel(of: activity)?.json)
            var actions: [Action] = [
                writes.produce(
                    .state, key: activity.rawValue, value: snapshot, then: .snapshot(activity, offsets: completion.offsets),
                    trace: completion.traces.isEmpty ? nil : completion.newest.push.traceContext),
                .observe(.pushCompleted(
                    completion.newest.snapshot, commands: completion.offsets.count, tokens: completion.tokens, sample: completion.sample,
                    outcome: PushOutcome(
                        activityID: activity, app: completion.newest.snapshot.app, summary: completion.summary,
                        tokens: completion.tokens, commandIDs: completion.commandIDs))),
            ]
            if !completion.traces.isEmpty {
                let push = completion.newest.push
                actions.append(.observe(.pushTraced(PushTrace(
                    activityID: activity, version: push.version, event: push.event, commands: completion.offsets.count,
                    tokens: completion.tokens, traces: completion.traces, flushedAt: completion.newest.flushedAt))))
            }
            return actions
        case .audienceStart(let offset):
            guard let observation = audienceStarts.finish(offset) else { return [] }
            return [.observe(observation)] + complete(.starts, [offset])
        }
    }
}
