import LiveDispatchCore

extension WorkerAPI {
    /// `GET /v1/audiences/{audience}`: an audience's push-to-start tokens
    /// and the starts each was sent, from the memory of the owner of its
    /// partition when that is this worker, else read from its partition of
    /// `token-store`.
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
        if let owner, let partition = await owner.partition(of: audience.rawValue),
            let page = owner.reads.audience(audience, partition: partition, after: cursor.map { $0.lowercased() }, limit: limit)
        {
            guard page.count > 0 else {
                return .notFound(.init(body: .json(.init(
                    error: "not-found", message: "the owner of its partition holds no push-to-start token of audience \(audience.rawValue.debugDescription)"))))
            }
            let items = page.items.map { Self.audienceToken($0.registration, ledger: $0.ledger) }
            return .ok(.init(body: .json(.init(audience: audience.rawValue, count: page.count, items: items, nextCursor: page.next, source: .owner))))
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
            return Self.audienceToken(registration, ledger: model.ledgers[token])
        }
        return .ok(.init(body: .json(.init(audience: audience.rawValue, count: model.tokens.count, items: items, nextCursor: next, source: .kafka))))
    }

    /// A push-to-start token and the starts it was sent, as the API shows them.
    static func audienceToken(_ registration: PushToStartRegistration, ledger: PushToStartBudget.Ledger?) -> Components.Schemas.AudienceToken {
        .init(
            token: registration.token.hex, attributesType: registration.attributesType, app: registration.app, device: registration.device,
            environment: registration.environment.rawValue, registeredAt: registration.registeredAt?.seconds,
            expiresAt: registration.expiresAt?.seconds,
            starts: (ledger?.starts ?? []).map { .init(activityId: $0.activityID.rawValue, at: $0.at.seconds) })
    }
}
