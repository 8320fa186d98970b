import LiveDispatchCore

extension WorkerAPI {
    /// `GET /v1/activities/{activity_id}`: the activity from the memory of
    /// its partition's owner when that is this worker; otherwise what Kafka
    /// holds of it, read from its partition of `state` and `token-store`
    /// and from `dead-letters`.
    func getActivity(_ input: Operations.GetActivity.Input) async throws -> Operations.GetActivity.Output {
        let limit = input.query.tokensLimit ?? 100
        let id = input.path.activityId
        if let bad = Self.badPage(activity: id, cursor: nil, limit: limit, limitParameter: "tokens_limit") { return .badRequest(bad) }
        if let answer = await ownerRead(id, after: nil, limit: limit) {
            guard let read = answer else {
                return .notFound(.init(body: .json(.init(error: "not-found", message: "the owner of its partition holds no state or token of activity \(id.debugDescription)"))))
            }
            let state = read.state
            let view = Components.Schemas.ActivityView(
                activityId: id, version: state.map { Int(clamping: $0.version) }, ended: state?.isEnded ?? false,
                state: state.flatMap { Self.container($0.json) }, lockScreen: state.map(LockScreen.render),
                pushes: read.pushes.map(Self.summary), tokens: Self.tokenPage(read, activity: id), source: .owner)
            return .ok(.init(body: .json(view)))
        }

        var model = ActivityReadModel(activityID: id)
        var letters = DeadLetterQuery(activity: id, reason: nil, limit: 10)
        let failure = await Self.reading {
            try await readTopic(topics.state, .key(id)) { model.stateRecord(key: $0.key, value: $0.value) }
            try await readTopic(topics.tokenStore, .key(id)) { model.tokenStoreRecord(key: $0.key, value: $0.value) }
            try await readTopic(topics.deadLetters, .all) { letters.consider(partition: $0.partition, offset: $0.offset, value: $0.value) }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        let newest = letters.newest
        guard model.isKnown || !newest.isEmpty else {
            return .notFound(.init(body: .json(.init(error: "not-found", message: "Kafka holds no state, token or dead letter of activity \(id.debugDescription)"))))
        }
        let view = Components.Schemas.ActivityView(
            activityId: id, version: model.version, ended: model.isEnded, state: model.state.flatMap(Self.container),
            lockScreen: model.lockScreen, pushes: model.pushes.map(Self.summary),
            tokens: Self.tokenPage(model, after: nil, limit: limit),
            deadLetters: Self.entries(newest), source: .kafka)
        return .ok(.init(body: .json(view)))
    }
}

extension WorkerAPI {
    /// `GET /v1/activities/{activity_id}/tokens`: a page of the activity's
    /// tokens, each with its last outcome, from its partition's owner when
    /// that is this worker, else from its partition of `token-store` (the
    /// snapshot on `state` gives the derived outcomes).
    func listActivityTokens(_ input: Operations.ListActivityTokens.Input) async throws -> Operations.ListActivityTokens.Output {
        let limit = input.query.limit ?? 100
        let id = input.path.activityId
        let cursor = input.query.cursor
        if let bad = Self.badPage(activity: id, cursor: cursor, limit: limit, limitParameter: "limit") { return .badRequest(bad) }
        if let answer = await ownerRead(id, after: cursor.map { $0.lowercased() }, limit: limit) {
            guard let read = answer else { return .ok(.init(body: .json(.init(count: 0, items: [], source: .owner)))) }
            return .ok(.init(body: .json(Self.tokenPage(read, activity: id))))
        }
        var model = ActivityReadModel(activityID: id)
        let failure = await Self.reading {
            try await readTopic(topics.state, .key(id)) { model.stateRecord(key: $0.key, value: $0.value) }
            try await readTopic(topics.tokenStore, .key(id)) { model.tokenStoreRecord(key: $0.key, value: $0.value) }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        return .ok(.init(body: .json(Self.tokenPage(model, after: cursor.map { $0.lowercased() }, limit: limit))))
    }

    /// The 400 for a bad activity id, token cursor or page size, or nil.
    static func badPage(activity: String, cursor: String?, limit: Int, limitParameter: String) -> Components.Responses.BadRequest? {
        var problems: [Components.Schemas.Problem] = []
        if (try? ActivityID(activity)) == nil {
            problems.append(.init(pointer: "#/parameters/activity_id", message: "expected 1 to 256 bytes without control characters"))
        }
        problems += pageProblems(cursor: cursor, limit: limit, limitParameter: limitParameter)
        guard !problems.isEmpty else { return nil }
        return .init(body: .json(APIError.invalid("the request is not valid", problems: problems).body))
    }

    /// What is wrong with a page's token cursor and size.
    static func pageProblems(cursor: String?, limit: Int, limitParameter: String) -> [Components.Schemas.Problem] {
        var problems: [Components.Schemas.Problem] = []
        if let cursor, (try? DeviceToken(hex: cursor)) == nil {
            problems.append(.init(pointer: "#/parameters/cursor", message: "expected a token in hex, the next_cursor of a previous page"))
        }
        if let bad = badLimit(limit, parameter: limitParameter), case .json(let body) = bad.body { problems += body.problems ?? [] }
        return problems
    }

    /// The activity as its partition's owner holds it, when this worker
    /// owns the partition and has restored it (`.some(nil)`: it holds
    /// nothing of the activity); nil when another worker, or Kafka, must answer.
    func ownerRead(_ id: String, after cursor: String?, limit: Int) async -> PartitionDispatcher.ActivityRead?? {
        guard let owner, let activity = try? ActivityID(id), let partition = await owner.partition(of: id) else { return nil }
        return owner.reads.activity(activity, partition: partition, tokensAfter: cursor, limit: limit)
    }

    /// A page of the owner's tokens as the API shows it.
    static func tokenPage(_ read: PartitionDispatcher.ActivityRead, activity: String) -> Components.Schemas.TokenPage {
        let latestPush = read.pushes.first
        let entries = read.tokens.items.map { registration in
            let outcome = TokenOutcome.shown(recorded: registration.lastOutcome, registeredAt: registration.registeredAt, latestPush: latestPush)
            return ActivityReadModel.TokenEntry(
                token: registration.token.hex, registration: registration.json, outcome: outcome,
                derived: outcome != nil && outcome != registration.lastOutcome)
        }
        return .init(count: read.tokens.count, items: entries.map(tokenEntry), nextCursor: read.tokens.next, source: .owner)
    }

    /// A page of the model's tokens as the API shows it.
    static func tokenPage(_ model: ActivityReadModel, after cursor: String?, limit: Int) -> Components.Schemas.TokenPage {
        let (entries, next) = model.tokenPage(after: cursor, limit: limit)
        return .init(count: model.tokens.count, items: entries.map(tokenEntry), nextCursor: next, source: .kafka)
    }

    /// One token of a page as the API shows it.
    static func tokenEntry(_ entry: ActivityReadModel.TokenEntry) -> Components.Schemas.TokenEntry {
        Components.Schemas.TokenEntry(
            token: entry.token, environment: entry.registration["environment"]?.stringValue,
            registeredAt: entry.registration["registered_at"]?.numberValue, expiresAt: entry.registration["expires_at"]?.numberValue,
            lastOutcome: entry.outcome.map {
                Components.Schemas.TokenOutcome(
                    result: $0.result == .failed ? .failed : .delivered, reason: $0.reason, version: Int(clamping: $0.version),
                    kind: .init(rawValue: $0.event.rawValue) ?? .update, at: $0.at.seconds, derived: entry.derived)
            })
    }
}

extension WorkerAPI {
    /// `GET /v1/activities`: the activities whose id contains `query`, from
    /// memory when this worker owns every partition, else from the `state` topic.
    func listActivities(_ input: Operations.ListActivities.Input) async throws -> Operations.ListActivities.Output {
        let limit = input.query.limit ?? 100
        if let bad = Self.badLimit(limit, parameter: "limit") { return .badRequest(bad) }
        let text = input.query.query.flatMap { $0.isEmpty ? nil : $0 }
        if let owner, let all = await owner.ownsAll() {
            let listing = owner.reads.activities(containing: text, limit: limit, in: all)
            // Every partition was readable a moment ago; one given up since is read from Kafka.
            if listing.partitions.count == all.count {
                let activities = listing.entries.map {
                    Components.Schemas.ActivitySummary(
                        activityId: $0.state.activityID.rawValue, version: Int(clamping: $0.state.version), ended: $0.state.isEnded,
                        tokens: $0.tokens, lockScreen: LockScreen.render($0.state), lastPush: $0.lastPush.map(Self.summary))
                }
                return .ok(.init(body: .json(.init(activities: activities, matched: listing.matched, truncated: false, source: .owner))))
            }
        }
        var query = ActivityListQuery(containing: input.query.query)
        let failure = await Self.reading {
            try await readTopic(topics.state, .all) { query.consider(key: $0.key, value: $0.value) }
            query.countTokens(of: query.first(limit).map(\.activityID))
            try await readTopic(topics.tokenStore, .all) { query.tokenStoreRecord(key: $0.key, value: $0.value) }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        let activities = query.first(limit).map {
            Components.Schemas.ActivitySummary(
                activityId: $0.activityID, version: $0.version, ended: $0.ended, tokens: query.tokenCount(of: $0.activityID),
                lockScreen: $0.lockScreen, lastPush: $0.lastPush.map(Self.summary))
        }
        return .ok(.init(body: .json(.init(activities: activities, matched: query.matched, truncated: query.truncated, source: .kafka))))
    }
}

extension WorkerAPI {
    /// A push summary as the API shows it.
    static func summary(_ push: PushSummary) -> Components.Schemas.PushSummary {
        Components.Schemas.PushSummary(
            version: Int(clamping: push.version), event: .init(rawValue: push.event.rawValue) ?? .update,
            completedAt: push.completedAt.seconds, commands: push.commands, delivered: push.delivered,
            failed: .init(additionalProperties: push.failed))
    }
}
