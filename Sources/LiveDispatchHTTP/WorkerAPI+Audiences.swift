import LiveDispatchCore

extension WorkerAPI {
    /// `GET /v1/audiences/{audience}`: an audience's push-to-start tokens
    /// and the starts each was sent, read from its partition of
    /// `token-store`, so any worker answers alike.
    func getAudience(_ input: Operations.GetAudience.Input) async throws -> Operations.GetAudience.Output {
        let limit = input.query.limit ?? 100
        let cursor = input.query.cursor
        var problems: [Components.Schemas.Problem] = []
        let audience = try? AudienceKey(input.path.audience)
        if audience == nil {
            problems.append(.init(pointer: "#/parameters/audience", message: "expected 1 to 256 bytes without control characters"))
        }
        problems += Self.pageProblems(cursor: cursor, limit: limit, limitParameter: "limit")
        guard let audience, problems.isEmpty else {
            return .badRequest(.init(body: .json(APIError.invalid("the request is not valid", problems: problems).body)))
        }

        var model = AudienceReadModel(audience: audience)
        let failure = await Self.reading {
            try await readTopic(topics.tokenStore, .key(audience.rawValue)) { model.tokenStoreRecord(key: $0.key, value: $0.value) }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        guard !model.tokens.isEmpty else {
            return .notFound(.init(body: .json(.init(
                error: "not-found", message: "Kafka holds no push-to-start token of audience \(audience.rawValue.debugDescription)"))))
        }
        let (page, next) = model.page(after: cursor.map { $0.lowercased() }, limit: limit)
        let items = page.compactMap { token -> Components.Schemas.AudienceToken? in
            guard let registration = model.tokens[token] else { return nil }
            return .init(
                token: token, attributesType: registration.attributesType, app: registration.app, device: registration.device,
                environment: registration.environment.rawValue, registeredAt: registration.registeredAt?.seconds,
                expiresAt: registration.expiresAt?.seconds,
                starts: (model.ledgers[token]?.starts ?? []).map { .init(activityId: $0.activityID.rawValue, at: $0.at.seconds) })
        }
        return .ok(.init(body: .json(.init(audience: audience.rawValue, count: model.tokens.count, items: items, nextCursor: next))))
    }
}
