import LiveDispatchCore

extension WorkerAPI {
    /// `GET /v1/channels`: the broadcast channels on the compacted
    /// `channels` topic (every partition, the latest record of each
    /// activity; a tombstone is a deleted channel).
    func listChannels(_ input: Operations.ListChannels.Input) async throws -> Operations.ListChannels.Output {
        let limit = input.query.limit ?? 100
        if let bad = Self.badLimit(limit, parameter: "limit") { return .badRequest(bad) }
        let filter = input.query.activity ?? ""
        var channels: [String: ActivityChannel] = [:]
        let failure = await Self.reading {
            try await readTopic(topics.channels, .all) { record in
                guard let key = record.key else { return }
                let activity = String(decoding: key, as: UTF8.self)
                guard filter.isEmpty || activity.contains(filter) else { return }
                // A record that does not read is left out rather than shown wrong.
                channels[activity] = record.value.flatMap { try? JSONValue.parse($0) }.flatMap { try? ActivityChannel(json: $0) }
            }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        let listed = channels.keys.sorted().prefix(limit).compactMap { activity -> Components.Schemas.Channel? in
            guard let channel = channels[activity] else { return nil }
            return .init(
                activityId: activity, channelId: channel.id, environment: channel.environment.rawValue,
                storagePolicy: channel.storagePolicy.description, createdAt: channel.createdAt.seconds, app: channel.app)
        }
        return .ok(.init(body: .json(.init(count: channels.count, channels: listed))))
    }
}
