import LiveDispatchCore

extension WorkerAPI {
    /// `GET /v1/activities/{activity_id}`: what Kafka holds of an activity,
    /// read from its partition of `state` and `token-store` and from
    /// `dead-letters`, so any worker answers alike.
    func getActivity(_ input: Operations.GetActivity.Input) async throws -> Operations.GetActivity.Output {
        let limit = input.query.tokensLimit ?? 100
        let id = input.path.activityId
        if let bad = Self.badPage(activity: id, cursor: nil, limit: limit, limitParameter: "tokens_limit") { return .badRequest(bad) }

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
        guard model.isKnown || !letters.newest.isEmpty else {
            return .notFound(.init(body: .json(.init(error: "not-found", message: "Kafka holds no state, token or dead letter of activity \(id.debugDescription)"))))
        }
        let view = Components.Schemas.ActivityView(
            activityId: id, version: model.version, ended: model.isEnded, state: model.state.flatMap(Self.container),
            lockScreen: model.lockScreen, pushes: model.pushes.map(Self.summary),
            tokens: Self.tokenPage(model, after: nil, limit: limit),
            deadLetters: Self.entries(letters))
        return .ok(.init(body: .json(view)))
    }
}

extension WorkerAPI {
    /// `GET /v1/activities/{activity_id}/tokens`: a page of the activity's
    /// tokens from its partition of `token-store`, each with its last
    /// outcome (the snapshot on `state` gives the derived ones).
    func listActivityTokens(_ input: Operations.ListActivityTokens.Input) async throws -> Operations.ListActivityTokens.Output {
        let limit = input.query.limit ?? 100
        let id = input.path.activityId
        let cursor = input.query.cursor
        if let bad = Self.badPage(activity: id, cursor: cursor, limit: limit, limitParameter: "limit") { return .badRequest(bad) }
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

    /// A page of the model's tokens as the API shows it.
    static func tokenPage(_ model: ActivityReadModel, after cursor: String?, limit: Int) -> Components.Schemas.TokenPage {
        let (entries, next) = model.tokenPage(after: cursor, limit: limit)
        let items = entries.map { entry in
            Components.Schemas.TokenEntry(
                token: entry.token, environment: entry.registration["environment"]?.stringValue,
                registeredAt: entry.registration["registered_at"]?.numberValue, expiresAt: entry.registration["expires_at"]?.numberValue,
                lastOutcome: entry.outcome.map {
                    Components.Schemas.TokenOutcome(
                        result: $0.result == .failed ? .failed : .delivered, reason: $0.reason, version: Int(clamping: $0.version),
                        kind: .init(rawValue: $0.event.rawValue) ?? .update, at: $0.at.seconds, derived: entry.derived)
                })
        }
        return .init(count: model.tokens.count, items: items, nextCursor: next)
    }
}

extension WorkerAPI {
    /// `GET /v1/activities`: the activities whose id contains `query`, from the `state` topic.
    func listActivities(_ input: Operations.ListActivities.Input) async throws -> Operations.ListActivities.Output {
        let limit = input.query.limit ?? 100
        if let bad = Self.badLimit(limit, parameter: "limit") { return .badRequest(bad) }
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
        return .ok(.init(body: .json(.init(activities: activities, matched: query.matched, truncated: query.truncated))))
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
